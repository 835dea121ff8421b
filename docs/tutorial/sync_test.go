package tutorial_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdBlocks returns the fenced code blocks of markdown whose info string is
// info, each as its lines.
func mdBlocks(t *testing.T, markdown, info string) [][]string {
	t.Helper()
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(markdown, "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in = true
			if strings.TrimSpace(strings.TrimPrefix(line, "```")) == info {
				cur = []string{}
			} else {
				cur = nil
			}
		case in && strings.TrimSpace(line) == "```":
			in = false
			if cur != nil {
				blocks = append(blocks, cur)
			}
		case in && cur != nil:
			cur = append(cur, line)
		}
	}
	if in {
		t.Fatal("docs/tutorial.md ends inside a code block")
	}
	return blocks
}

// codeLines drops trailing spaces and blank lines.
func codeLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l = strings.TrimRight(l, " \t\r"); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestTutorialInSync requires the ```go blocks of docs/tutorial.md, put end
// to end, to be tutorial_test.go from its package clause on, line for line
// (blank lines aside), so that the tutorial shows exactly the code that the
// examples of this package run and check. Blocks marked ```go fragment are
// excerpts that are not compiled; every package-qualified name they use
// from this module must exist.
func TestTutorialInSync(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "tutorial.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("tutorial_test.go")
	if err != nil {
		t.Fatal(err)
	}
	code := string(src)
	start := strings.Index(code, "\npackage ")
	if start < 0 {
		t.Fatal("tutorial_test.go has no package clause")
	}
	want := codeLines(strings.Split(code[start+1:], "\n"))
	var got []string
	for _, b := range mdBlocks(t, string(md), "go") {
		got = append(got, codeLines(b)...)
	}
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("docs/tutorial.md and docs/tutorial/tutorial_test.go differ at code line %d (blank lines not counted):\n"+
				"tutorial.md:      %q\ntutorial_test.go: %q\nedit them together", i+1, g, w)
		}
	}

	exported := map[string]map[string]bool{"bilevel": exportedNames(t, filepath.Join("..", ".."))}
	for _, pkg := range []string{"optim", "graph", "implicit", "unroll"} {
		exported[pkg] = exportedNames(t, filepath.Join("..", "..", pkg))
	}
	qualified := regexp.MustCompile(`\b(bilevel|optim|graph|implicit|unroll)\.([A-Za-z_]\w*)`)
	for _, b := range mdBlocks(t, string(md), "go fragment") {
		for _, m := range qualified.FindAllStringSubmatch(strings.Join(b, "\n"), -1) {
			if !exported[m[1]][m[2]] {
				t.Errorf("docs/tutorial.md: a go fragment uses %s.%s, which package %s does not declare", m[1], m[2], m[1])
			}
		}
	}
}

// exportedNames returns the exported top-level names of the package in dir.
func exportedNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, id := range s.Names {
							names[id.Name] = true
						}
					}
				}
			}
		}
	}
	return names
}
