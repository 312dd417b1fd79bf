//go:build !race

// The race detector changes what allocates (sync.Pool drops items at
// random under it), so the exact counts are checked without it: .ci/run runs
// this test in a step of its own.

package storm

import (
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// perfDoc is the document whose counts TestPerformanceDocCounts checks.
const perfDoc = "../../docs/performance.md"

// TestPerformanceDocCounts re-measures the exact counts of
// docs/performance.md and fails when one no longer matches: allocs/op and
// B/op of every in-memory row for every library (the rows "± 0%" in the
// latest run, the same from run to run on any machine with the same Go),
// and retryhttp's hits/req in the storm. Timings, the loopback rows whose
// counts vary by a few percent, and the bytes of the parallel row are not
// checked.
//
// The counts are read where the doc prints them: the benchstat tables of
// "Latest run" (the output of bench/run.sh, pasted), and the figures in
// prose marked <!--fig KEY-->VALUE<!--/fig-->, where KEY is
// "UNIT ROW LIB", a cell of those tables. Allocations must match exactly,
// bytes within 3% (tolerance). When a count changes, run
// bench/run.sh, paste its output, and update the marked figures this test
// lists.
func TestPerformanceDocCounts(t *testing.T) {
	doc, err := os.ReadFile(perfDoc)
	if err != nil {
		t.Fatal(err)
	}
	cells, err := benchstatCells(latestRun(string(doc)))
	if err != nil {
		t.Fatal(err)
	}
	marked := markedFigures(string(doc))
	if len(marked) == 0 {
		t.Error("no marked figure in " + perfDoc)
	}

	measured := measureCounts(t)
	checked := 0
	for key, got := range measured {
		doc, ok := cells[key]
		if !ok {
			continue // not in the latest run: nothing documented
		}
		checked++
		if !sameFigure(doc, got, tolerance(key)) {
			t.Errorf("%s, latest run: %s documented, %v measured; run bench/run.sh and paste its output", key, doc, got)
		}
	}
	if checked < 40 {
		t.Errorf("only %d cells of the latest run checked: did its rows or columns change names?", checked)
	}
	for _, m := range marked {
		got, ok := measured[m.key]
		if !ok {
			t.Errorf("%s: marked figure %q names no measured count", perfDoc, m.key)
			continue
		}
		if !sameFigure(m.value, got, tolerance(m.key)) {
			t.Errorf("%s: figure %q is %s, measured %v", perfDoc, m.key, m.value, got)
		}
	}
	t.Logf("%d cells of the latest run and %d marked figures checked", checked, len(marked))
}

// measureCounts runs the bodies of the benchmarks whose counts are exact,
// and the storm once for retryhttp and a bare transport. Keys are "UNIT ROW
// LIB", as benchstat names them: "allocs/op Retry/req=GET retryhttp".
//
// Each body runs 200 and then 1,000 times, and the counts per operation are
// those of the 800 more: the one-time allocations of a run (a transport's
// lazily made state, RunParallel's goroutines), which a run of a few
// hundred iterations would spread over its operations, cancel out, as they
// vanish in bench/run.sh's runs of hundreds of thousands.
func measureCounts(t *testing.T) map[string]float64 {
	got := map[string]float64{}
	add := func(row, lib string, body func(*testing.B)) {
		short, long := benchmarkN(t, 200, body), benchmarkN(t, 1000, body)
		n := float64(long.N - short.N)
		got["allocs/op "+row+" "+lib] = math.Round(float64(long.MemAllocs-short.MemAllocs) / n)
		got["B/op "+row+" "+lib] = float64(long.MemBytes-short.MemBytes) / n
	}
	for _, p := range peers() {
		for _, rq := range requests {
			add("HappyPath/via=mem/req="+rq.name, p.name, happyMem(rq.make, p))
			if retryRow(rq.name, p.name) {
				add("Retry/req="+rq.name, p.name, retry(rq.make, p))
			}
		}
		add("Parallel/req=GET64", p.name, parallel64(p))
		// Bytes in parallel move by several percent between short runs,
		// with how the goroutines share sync.Pool's caches: allocations only.
		delete(got, "B/op Parallel/req=GET64 "+p.name)
	}
	for _, lib := range libraries() {
		switch lib.name {
		case "retryhttp defaults":
			got["hits/req Storm/req=dead503 retryhttp"] = amplification(t, lib.newClient)
		case "no retries":
			got["hits/req Storm/req=dead503 bare"] = amplification(t, lib.newClient)
		}
	}
	return got
}

// benchmarkN runs body as a benchmark of exactly n iterations.
func benchmarkN(t *testing.T, n int, body func(*testing.B)) testing.BenchmarkResult {
	t.Helper()
	bt := flag.Lookup("test.benchtime")
	old := bt.Value.String()
	if err := bt.Value.Set(fmt.Sprintf("%dx", n)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bt.Value.Set(old) }()
	r := testing.Benchmark(body)
	if r.N != n {
		t.Fatalf("the benchmark failed or ran %d times, not %d", r.N, n)
	}
	return r
}

// latestRun returns the first fenced block after the heading "## Latest
// run".
func latestRun(doc string) string {
	_, after, ok := strings.Cut(doc, "## Latest run")
	if !ok {
		return ""
	}
	_, block, ok := strings.Cut(after, "```\n")
	if !ok {
		return ""
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// benchstatCells reads the tables benchstat -col /lib prints: for each
// table, a header line naming the libraries between │, a line naming the
// unit, then one line per row. It returns the first number of each cell,
// as printed, keyed "UNIT ROW LIB" (the row without its -GOMAXPROCS
// suffix).
func benchstatCells(block string) (map[string]string, error) {
	cells := map[string]string{}
	lines := strings.Split(block, "\n")
	for i := 0; i+1 < len(lines); i++ {
		libs, starts := columns(lines[i])
		if len(libs) == 0 {
			continue
		}
		units, _ := columns(lines[i+1])
		if len(units) == 0 {
			return nil, fmt.Errorf("table at line %d: no unit line", i+1)
		}
		unit := units[0]
		for j := i + 2; j < len(lines) && strings.TrimSpace(lines[j]) != ""; j++ {
			line := []rune(lines[j])
			name, _, _ := strings.Cut(strings.TrimSpace(string(line[:min(starts[0], len(line))])), " ")
			if name == "geomean" || name == "" {
				continue
			}
			if k := strings.LastIndex(name, "-"); k > 0 {
				name = name[:k]
			}
			for c, lib := range libs {
				if starts[c] >= len(line) {
					break
				}
				end := len(line)
				if c+1 < len(starts) {
					end = min(starts[c+1], len(line))
				}
				if f := strings.Fields(string(line[starts[c]:end])); len(f) > 0 {
					cells[unit+" "+name+" "+lib] = f[0]
				}
			}
			i = j
		}
	}
	return cells, nil
}

// columns splits a benchstat header line ("   │ a │ b │") into its names
// and the rune offset at which each column starts. A line without │ has
// none.
func columns(line string) (names []string, starts []int) {
	r := []rune(line)
	var bars []int
	for i, c := range r {
		if c == '│' {
			bars = append(bars, i)
		}
	}
	for k := 0; k+1 < len(bars); k++ {
		names = append(names, strings.TrimSpace(string(r[bars[k]+1:bars[k+1]])))
		starts = append(starts, bars[k]+1)
	}
	return names, starts
}

// figure is a figure marked in prose: <!--fig KEY-->VALUE<!--/fig-->.
type figure struct{ key, value string }

var figRE = regexp.MustCompile(`<!--fig ([^>]*?)-->([^<]*)<!--/fig-->`)

// markedFigures returns the figures marked in doc.
func markedFigures(doc string) []figure {
	var figs []figure
	for _, m := range figRE.FindAllStringSubmatch(doc, -1) {
		figs = append(figs, figure{strings.TrimSpace(m[1]), strings.TrimSpace(m[2])})
	}
	return figs
}

// tolerance is the relative difference allowed between a documented count
// and the measured one: none for allocations and hits, which are integers
// or ratios of integers, but 3% for bytes, whose average moves a little
// with what the garbage collector, sync.Pool and RunParallel's goroutines do
// during a run. A new allocation, however small, is caught by the exact
// count of allocations.
func tolerance(key string) float64 {
	switch {
	case strings.HasPrefix(key, "B/op "):
		return 0.03
	case key == "hits/req Storm/req=dead503 retryhttp":
		// The probes of the parked retries (at most 9 per storm of 5,000
		// requests) depend on timing: 1.002 to 1.004.
		return 0.002
	}
	return 0
}

// sameFigure reports whether the documented figure doc, as printed
// ("1,568", "4.363Ki", "137 KiB", "1.10"), is the measured one rounded to
// the digits it shows, or within the relative tolerance rel of it.
func sameFigure(doc string, measured, rel float64) bool {
	s := strings.ReplaceAll(strings.TrimSpace(doc), ",", "")
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(s, "B"), " "))
	scale := 1.0
	for suffix, f := range map[string]float64{"Ki": 1 << 10, "Mi": 1 << 20} {
		if strings.HasSuffix(s, suffix) {
			s, scale = strings.TrimSpace(strings.TrimSuffix(s, suffix)), f
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	decimals := 0
	if _, frac, ok := strings.Cut(s, "."); ok {
		decimals = len(frac)
	}
	half := 0.5 * math.Pow(10, -float64(decimals)) * scale
	return math.Abs(v*scale-measured) <= max(half, rel*measured)+1e-9
}
