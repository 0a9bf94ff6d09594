package experiments

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocExample parses the complete example in docs/experiments.md, so
// the reference cannot drift from the parser.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/experiments.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "A complete example (every section):\n\n```yaml\n"
	i := strings.Index(string(doc), marker)
	if i < 0 {
		t.Fatal("docs/experiments.md lost its complete example")
	}
	body := string(doc[i+len(marker):])
	body = body[:strings.Index(body, "```")]
	s, err := Parse("docs/experiments.md", []byte(body), os.ReadFile)
	if err != nil {
		t.Fatalf("the documented example does not parse: %v", err)
	}
	if n := len(Expand(s)); n != 4*2*2*3 {
		t.Errorf("documented example expands to %d runs, want 48", n)
	}
}

// TestDocsModelVersion: the docs name the model version results carry.
func TestDocsModelVersion(t *testing.T) {
	doc, err := os.ReadFile("../docs/experiments.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "`"+ModelVersion+"`") {
		t.Errorf("docs/experiments.md does not name ModelVersion %s", ModelVersion)
	}
	for _, m := range regexp.MustCompile("mptx-exp/[0-9]+").FindAllString(string(doc), -1) {
		if m != ModelVersion {
			t.Errorf("docs/experiments.md names %s; results say %s", m, ModelVersion)
		}
	}
}

// TestDocFileNames: the package doc names files that exist.
func TestDocFileNames(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range regexp.MustCompile(`[a-z_]+\.go`).FindAllString(string(doc), -1) {
		if _, err := os.Stat(f); err != nil && !strings.Contains(f, "*") {
			t.Errorf("doc.go names %s, which does not exist", f)
		}
	}
}
