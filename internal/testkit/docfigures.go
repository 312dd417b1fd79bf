package testkit

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Figures in docs/ that are exact counts are marked in the markdown,
// invisible once rendered: <!--fig KEY-->VALUE<!--/fig-->. A test per
// document measures each KEY again and fails when the VALUE written no longer
// matches, so a doc cannot drift from the code; to update one, change the
// VALUE the failure names. A VALUE written "≤ N" is an upper bound: the
// measure must not exceed N (allocations and bytes, bounds with a margin,
// so that a change of one allocation in net/http does not fail them).
// bench/storm/figures_test.go does the same for docs/performance.md.

// DocFigures returns the figures marked in a document, by key. A key
// marked twice must carry the same value.
func DocFigures(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	figs := map[string]string{}
	for _, m := range regexp.MustCompile(`<!--fig ([^>]*?)-->([^<]*)<!--/fig-->`).FindAllStringSubmatch(string(b), -1) {
		key, value := strings.TrimSpace(m[1]), strings.TrimSpace(m[2])
		if old, ok := figs[key]; ok && old != value {
			t.Errorf("%s: figure %q marked twice, as %q and %q", path, key, old, value)
		}
		figs[key] = value
	}
	return figs
}

// CheckDocFigures checks that every figure marked in path whose key starts
// with prefix is one of measured, formatted as the doc writes counts
// (1,234), and that every measured figure is marked.
func CheckDocFigures(t *testing.T, path, prefix string, measured map[string]int64) {
	t.Helper()
	figs := DocFigures(t, path)
	for key, value := range figs {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		got, ok := measured[key]
		if !assert.True(t, ok, "%s: figure %q is measured by no test", path, key) {
			continue
		}
		if bound, ok := upperBound(value); ok {
			assert.LessOrEqual(t, got, bound, "%s: figure %q is at most %s", path, key, value)
			continue
		}
		assert.Equal(t, withCommas(got), value, "%s: figure %q", path, key)
	}
	for key := range measured {
		_, ok := figs[key]
		assert.True(t, ok, "%s: figure %q is not marked", path, key)
	}
}

// upperBound returns N of a figure written "≤ N" (N as the docs write
// counts, 1,234), and whether it is one.
func upperBound(value string) (int64, bool) {
	rest, ok := strings.CutPrefix(value, "≤")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(rest), ",", ""), 10, 64)
	return n, err == nil
}

// withCommas formats n as the docs write counts: 12,496.
func withCommas(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
