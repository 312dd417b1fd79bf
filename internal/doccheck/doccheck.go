// Package doccheck holds doc comments to the values they state: the
// numbers in the doc comments of a package's exported API, each tied by a
// test of that package to the constant it names (CheckNumbers). It imports
// nothing of this module, so that any package's internal tests may use it.
package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Numbers in doc comments drift as figures in docs/ do: a doc comment that
// says "the default, 60s" is wrong the day the constant becomes 30s, and no
// reader notices. CheckNumbers reads the doc comments of a package's
// exported API (and its package doc) and holds every number in them to a
// row of a table kept beside the package's constants: a row whose
// Text is written from the constant it states (fmt.Sprint, Dur), so that a
// change of either fails the test; or, for a number that states no
// constant of the package (a status code in a rule, an RFC, an example), a
// row whose Text is that phrase as written. Status codes 100-599, 0 and 1
// written alone need no row.

// A row of CheckNumbers is {Decl, Text}: Text is a phrase of the doc
// comment of Decl ("package", "WithMaxDelay",
// "CustomizedDelayFnOptions.Base", "Transport.RoundTrip", and, for a group
// of constants with one comment, "const(First)") that holds numbers.

// Dur formats d as doc comments write durations: 250ms, 2s, 60s.
func Dur(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	case d%time.Millisecond == 0:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
	return d.String()
}

// Commas formats n as doc comments write large counts: 10,000.
func Commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// CheckNumbers checks the doc comments of the package in dir against
// rows: each row's Text is in the doc comment of its Decl, and every number
// in the prose of a doc comment lies within a row's Text. The code blocks
// of a doc comment are examples: a row may name a phrase of one, but their
// numbers need none.
func CheckNumbers(t *testing.T, dir string, rows [][2]string) {
	t.Helper()
	docs, prose := comments(t, dir)
	covered := map[string][][2]int{} // by decl: the spans of its rows in its prose
	for _, r := range rows {
		decl, text := r[0], r[1]
		doc, ok := docs[decl]
		if !ok {
			t.Errorf("%s: no exported declaration %s with a doc comment (a row of its doc numbers names it)", dir, decl)
			continue
		}
		for from, p := 0, prose[decl]; ; {
			i := strings.Index(p[from:], text)
			if i < 0 {
				break
			}
			covered[decl] = append(covered[decl], [2]int{from + i, from + i + len(text)})
			from += i + len(text)
		}
		if !strings.Contains(doc, text) {
			t.Errorf("%s: the doc comment of %s no longer says %q: the comment or the value it states changed; doc comment:\n%s", dir, decl, text, doc)
		}
	}
	decls := make([]string, 0, len(prose))
	for d := range prose {
		decls = append(decls, d)
	}
	sort.Strings(decls)
	for _, d := range decls {
		doc := prose[d]
		for _, m := range docNumber.FindAllStringIndex(doc, -1) {
			if inWord(doc, m) || exempt(doc, m) || within(covered[d], m) {
				continue
			}
			t.Errorf("%s: the doc comment of %s says %q (in %q), which no row ties to the value it states: add a row for it, or remove the number",
				dir, d, doc[m[0]:m[1]], around(doc, m))
		}
	}
}

// docNumber is a number in a doc comment: 3, 0.5, 10,000, 2^30 (two).
var docNumber = regexp.MustCompile(`\d+(?:[.,]\d+)*`)

// exempt reports whether the number at m of doc needs no row: 0 or 1, or
// a status code (100-599, or a class such as 5xx), not followed by a unit
// (nor by ^ or /: a power, a fraction).
func exempt(doc string, m []int) bool {
	n, next := doc[m[0]:m[1]], doc[m[1]:]
	if strings.HasPrefix(next, "xx") {
		return true
	}
	if w, ok := strings.CutPrefix(next, " "); ok {
		w, _, _ = strings.Cut(w, " ")
		if units[strings.TrimRight(w, ".,;:)")] {
			return false
		}
	}
	if next != "" && strings.ContainsAny(next[:1], "abcdefghijklmnopqrstuvwxyzµ×%^/") {
		return false
	}
	if m[0] > 0 && strings.ContainsAny(doc[m[0]-1:m[0]], "^/") {
		return false
	}
	return n == "0" || n == "1" || len(n) == 3 && n >= "100" && n <= "599"
}

// inWord reports whether the number at m of doc is part of a word or a
// name (seed2409de8f, v2), not a number.
func inWord(doc string, m []int) bool {
	if m[0] == 0 {
		return false
	}
	c := doc[m[0]-1]
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// units are the words that make the number before them a quantity: 1 MiB.
var units = map[string]bool{"ns": true, "µs": true, "ms": true, "s": true, "second": true, "seconds": true,
	"minute": true, "minutes": true, "B": true, "KiB": true, "MiB": true, "GiB": true, "KB": true, "MB": true}

// within reports whether m lies within one of spans.
func within(spans [][2]int, m []int) bool {
	for _, s := range spans {
		if s[0] <= m[0] && m[1] <= s[1] {
			return true
		}
	}
	return false
}

// around returns the words of doc around m, for a failure message.
func around(doc string, m []int) string {
	from, to := max(m[0]-40, 0), min(m[1]+40, len(doc))
	return doc[from:to]
}

// comments returns the doc comments of the exported API of the package in
// dir (its non-test files), by declaration (see CheckNumbers), each on one
// line, its words joined by single spaces: whole, and their prose alone
// (without their code blocks).
func comments(t *testing.T, dir string) (docs, prose map[string]string) {
	t.Helper()
	fset := token.NewFileSet()
	notTest := func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }
	pkgs, err := parser.ParseDir(fset, dir, notTest, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs, prose = map[string]string{}, map[string]string{}
	add := func(name string, cg *ast.CommentGroup) {
		if cg == nil {
			return
		}
		text := cg.Text()
		docs[name] = strings.Join(strings.Fields(text), " ")
		var words []string
		for _, line := range strings.Split(text, "\n") {
			if !strings.HasPrefix(line, "\t") { // gofmt indents code blocks with a tab
				words = append(words, strings.Fields(line)...)
			}
		}
		prose[name] = strings.Join(words, " ")
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			if f.Doc != nil {
				add("package", f.Doc)
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if name, ok := funcName(d); ok {
						add(name, d.Doc)
					}
				case *ast.GenDecl:
					genDocs(d, add)
				}
			}
		}
	}
	return docs, prose
}

// funcName returns the name of a function or method, Type.Method for a
// method, and whether it is exported (a method of an exported type).
func funcName(d *ast.FuncDecl) (string, bool) {
	if !d.Name.IsExported() {
		return "", false
	}
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name, true
	}
	typ := d.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, ok := typ.(*ast.Ident)
	if !ok || !id.IsExported() {
		return "", false
	}
	return id.Name + "." + d.Name.Name, true
}

// genDocs adds the doc comments of the exported types, constants and
// variables of d, and of the exported fields and methods of its types.
func genDocs(d *ast.GenDecl, add func(string, *ast.CommentGroup)) {
	if len(d.Specs) > 1 && d.Doc != nil && d.Tok != token.TYPE {
		if v, ok := d.Specs[0].(*ast.ValueSpec); ok && v.Names[0].IsExported() {
			add("const("+v.Names[0].Name+")", d.Doc)
		}
	}
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			if !s.Name.IsExported() {
				continue
			}
			doc := s.Doc
			if doc == nil && len(d.Specs) == 1 {
				doc = d.Doc
			}
			add(s.Name.Name, doc)
			var fields *ast.FieldList
			switch typ := s.Type.(type) {
			case *ast.StructType:
				fields = typ.Fields
			case *ast.InterfaceType:
				fields = typ.Methods
			}
			if fields == nil {
				continue
			}
			for _, f := range fields.List {
				for _, n := range f.Names {
					if n.IsExported() {
						add(s.Name.Name+"."+n.Name, f.Doc)
					}
				}
			}
		case *ast.ValueSpec:
			doc := s.Doc
			if doc == nil && len(d.Specs) == 1 {
				doc = d.Doc
			}
			for _, n := range s.Names {
				if n.IsExported() {
					add(n.Name, doc)
				}
			}
		}
	}
}

// CheckTableRows checks the rows of the markdown tables of the document at
// path against rows, each {Key, Text}: the table row that starts with Key
// (its first cell, as written: "`WithMaxDelay(") contains Text, a value
// written from the constant it states. A document's table of defaults
// (docs/options.md) is held to the code so.
func CheckTableRows(t *testing.T, path string, rows [][2]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for _, r := range rows {
		key, text := r[0], r[1]
		var row string
		for _, l := range lines {
			if strings.HasPrefix(l, "| "+key) {
				row = l
				break
			}
		}
		switch {
		case row == "":
			t.Errorf("%s: no table row starts with %q", path, key)
		case !strings.Contains(row, text):
			t.Errorf("%s: the row of %s no longer says %q: the table or the value it states changed; row:\n%s", path, key, text, row)
		}
	}
}
