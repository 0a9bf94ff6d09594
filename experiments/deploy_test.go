package experiments

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestDeployExamples keeps the cluster examples consistent: the Indexed
// Job's completions, parallelism and --shard denominator agree, it runs a
// shipped suite, and the merge Job and the Slurm script use the commands
// this package's CLI accepts.
func TestDeployExamples(t *testing.T) {
	data, err := os.ReadFile("deploy/k8s-indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Kind string
		Spec struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int
			Parallelism    int
			Template       struct {
				Spec struct {
					Containers []struct {
						Command []string
						Args    []string
					}
				}
			}
		}
	}
	docs := strings.Split(string(data), "\n---\n")
	if err := yaml.Unmarshal([]byte(docs[len(docs)-1]), &job); err != nil {
		t.Fatal(err)
	}
	if job.Kind != "Job" || job.Spec.CompletionMode != "Indexed" || job.Spec.Completions != job.Spec.Parallelism {
		t.Fatalf("job %+v: want an Indexed Job with completions == parallelism", job.Spec)
	}
	args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
	m := regexp.MustCompile(`exp run (\S+) --shard "\$\{JOB_COMPLETION_INDEX\}/(\d+)".*--out (\S+)`).FindStringSubmatch(strings.Join(strings.Fields(args), " "))
	if m == nil {
		t.Fatalf("job args %q: want mptx exp run SUITE --shard \"${JOB_COMPLETION_INDEX}/N\" ... --out DIR", args)
	}
	if n, _ := strconv.Atoi(m[2]); n != job.Spec.Completions {
		t.Errorf("--shard .../%d but completions %d", n, job.Spec.Completions)
	}
	if !slices.Contains(SuiteNames(), m[1]) {
		t.Errorf("job runs %q, not a shipped suite", m[1])
	}
	merge, err := os.ReadFile("deploy/k8s-merge-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := `"exp", "merge", "--out", "` + m[3] + `", "` + m[3] + `"`; !strings.Contains(string(merge), want) {
		t.Errorf("merge job does not run %s", want)
	}
	slurm, err := os.ReadFile("deploy/slurm-array.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"exp run '$what' --shard \\${SLURM_ARRAY_TASK_ID}/$shards", "--dependency=\"afterok:$array\"", "exp merge --out '$out' '$out'"} {
		if !strings.Contains(string(slurm), want) {
			t.Errorf("slurm-array.sh lacks %q", want)
		}
	}
}
