package experiments

import (
	"os"
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
