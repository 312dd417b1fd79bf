package retryhttp_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// typeDoc returns the doc comment of the type name declared in file, as
// go doc prints it: reflowed to its width, indented by four spaces.
func typeDoc(t *testing.T, file, name string) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
	require.NoError(t, err)
	pkg, err := doc.NewFromFiles(fset, []*ast.File{f}, "github.com/seed2409de8f/retryhttp")
	require.NoError(t, err)
	for _, typ := range pkg.Types {
		if typ.Name == name {
			pr := pkg.Printer()
			pr.TextPrefix = "    " // as go doc
			return string(pr.Text(pkg.Parser().Parse(typ.Doc)))
		}
	}
	t.Fatalf("%s declares no type %s", file, name)
	return ""
}

// TestRetryBudgetDocIsShort: RetryBudget's doc comment states the model a
// caller needs in at most 25 lines as go doc shows them (blank lines
// included), and leaves the mechanism to docs/storms.md and
// docs/budget-algorithm.md, which it names.
func TestRetryBudgetDocIsShort(t *testing.T) {
	text := typeDoc(t, "budget.go", "RetryBudget")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	require.LessOrEqual(t, len(lines), 25, "go doc RetryBudget:\n%s", text)
	require.Contains(t, text, "docs/storms.md")
	require.Contains(t, text, "docs/budget-algorithm.md")
}
