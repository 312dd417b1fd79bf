//go:build !race

package storm

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The generated parts of docs/performance.md: blocks between
// <!-- gen:NAME --> and <!-- /gen:NAME -->, which TestPerformanceDocCounts
// -update writes and TestPerformanceDocCounts reads back, and the figures
// its prose marks. (bench/cost/run.sh's table goes into the block
// gen:instructions, written by bench/perfdoc.sh, and is not read here.)

// docRow is a row of a generated table: what the reader sees, and the
// benchmark row (the sub-benchmark name without lib=).
type docRow struct{ label, row string }

// docTable is a generated table: one cell per row and library, holding the
// figures of units, " / " between them.
type docTable struct {
	block string
	title string // the header of the first column
	units []string
	libs  []string
	rows  []docRow
}

var allLibs = []string{"retryhttp", "retryhttp-nokeys", "bare", "retryablehttp", "failsafehttp"}

var docTables = []docTable{
	{
		block: "counts", title: "allocs / bytes per request", units: []string{"allocs/op", "B/op"}, libs: allLibs,
		rows: []docRow{
			{"happy GET (200 first time)", "HappyPath/via=mem/req=GET"},
			{"happy GET, circuit breaker", "HappyPathWith/opt=breaker"},
			{"happy GET, OTel metrics", "HappyPathWith/opt=metrics"},
			{"one 503 then 200", "Retry/req=GET"},
			{"64 KiB POST, key injected by retryhttp", "HappyPath/via=mem/req=POST64KiB"},
			{"64 KiB POST, one 503 then 200", "Retry/req=POST64KiB"},
			{"64 KiB POST, caller's key", "HappyPath/via=mem/req=POST64KiBKeyed"},
			{"hedged GET, hedge never fires", "HappyPathWith/opt=hedge"},
			{"new host, after 1,000 hosts", "NewHost/hosts=1000"},
			{"new host, after 100,000 hosts", "NewHost/hosts=100000"},
			{"GET from 64 goroutines (allocations only)", "Parallel/req=GET64"},
		},
	},
	{
		block: "heap", title: "live heap per host known", units: []string{"heapB/host"},
		libs: []string{"retryhttp", "bare", "retryablehttp", "failsafehttp"},
		rows: []docRow{
			{"after 1,000 hosts", "NewHost/hosts=1000"},
			{"after 100,000 hosts", "NewHost/hosts=100000"},
		},
	},
	{
		block: "storm", title: "server hits per request", units: []string{"hits/req"},
		libs: []string{"retryhttp", "bare", "retryablehttp", "failsafehttp"},
		rows: []docRow{{"dead backend answering 503, 50 clients × 100 GETs", "Storm/req=dead503"}},
	},
}

// blockRE matches a generated block; $1 is its name, $2 its content.
var blockRE = regexp.MustCompile(`(?s)<!-- gen:([a-z]+) -->\n(.*?)<!-- /gen:([a-z]+) -->`)

// replaceBlock returns doc with the content of block name replaced.
func replaceBlock(doc, name, content string) (string, error) {
	begin, end := "<!-- gen:"+name+" -->\n", "<!-- /gen:"+name+" -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("%s has no block %s...%s", perfDoc, begin, end)
	}
	return doc[:i+len(begin)] + content + doc[j:], nil
}

// block returns the content of block name.
func block(doc, name string) (string, error) {
	for _, m := range blockRE.FindAllStringSubmatch(doc, -1) {
		if m[1] == name && m[3] == name {
			return m[2], nil
		}
	}
	return "", fmt.Errorf("%s has no block <!-- gen:%s -->", perfDoc, name)
}

// writeCounts returns doc with its generated tables, its machine line and
// its marked figures made from measured.
func writeCounts(doc string, measured map[string]float64) (string, error) {
	var err error
	for _, tb := range docTables {
		if doc, err = replaceBlock(doc, tb.block, tb.render(measured)); err != nil {
			return "", err
		}
	}
	if doc, err = replaceBlock(doc, "machine", machine()+"\n"); err != nil {
		return "", err
	}
	var missing []string
	doc = figRE.ReplaceAllStringFunc(doc, func(s string) string {
		m := figRE.FindStringSubmatch(s)
		v, ok := measured[strings.TrimSpace(m[1])]
		if !ok {
			missing = append(missing, m[1])
			return s
		}
		return "<!--fig " + m[1] + "-->" + formatLike(m[2], v) + "<!--/fig-->"
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("marked figures that name no measured count: %q", missing)
	}
	return doc, nil
}

// render returns the markdown of tb with the figures of measured.
func (tb docTable) render(measured map[string]float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %s | %s |\n|---|%s\n", tb.title, strings.Join(tb.libs, " | "), strings.Repeat("---:|", len(tb.libs)))
	for _, r := range tb.rows {
		fmt.Fprintf(&b, "| %s `%s`", r.label, r.row)
		for _, lib := range tb.libs {
			var figs []string
			for _, u := range tb.units {
				if v, ok := measured[u+" "+r.row+" "+lib]; ok {
					figs = append(figs, format(u, v))
				}
			}
			if len(figs) == 0 {
				figs = []string{"—"}
			}
			fmt.Fprintf(&b, " | %s", strings.Join(figs, " / "))
		}
		b.WriteString(" |\n")
	}
	return b.String()
}

// readCounts returns the figures of the generated tables of doc and of the
// figures its prose marks, as printed, by key "UNIT ROW LIB".
func readCounts(doc string) (map[string]string, error) {
	counts := map[string]string{}
	for _, tb := range docTables {
		content, err := block(doc, tb.block)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(strings.TrimSpace(content), "\n")
		if len(lines) < 2 {
			return nil, fmt.Errorf("block %s: no table", tb.block)
		}
		libs := cells(lines[0])[1:]
		for _, line := range lines[2:] {
			cs := cells(line)
			_, row, ok := strings.Cut(cs[0], "`")
			row, _, ok2 := strings.Cut(row, "`")
			if !ok || !ok2 || len(cs) != len(libs)+1 {
				return nil, fmt.Errorf("block %s: cannot read the row %q", tb.block, line)
			}
			for c, lib := range libs {
				if cs[c+1] == "—" {
					continue
				}
				figs := strings.Split(cs[c+1], " / ")
				for u, f := range figs {
					if u < len(tb.units) {
						counts[tb.units[u]+" "+row+" "+lib] = f
					}
				}
			}
		}
	}
	return counts, nil
}

// cells splits a markdown table line into its trimmed cells.
func cells(line string) []string {
	parts := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// machine describes the machine and the Go that measured.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("Counts written by `bench/perfdoc.sh` on %s: %d CPUs (`nproc`), %s (`/proc/cpuinfo`), %s %s/%s.",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// format prints a figure of unit u as the tables do.
func format(u string, v float64) string {
	if u == "hits/req" {
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return commas(int64(math.Round(v)))
}

// formatLike prints v as old is printed: "1,296", "2.7 Ki", "136 Ki",
// "1.003".
func formatLike(old string, v float64) string {
	old = strings.TrimSpace(old)
	decimals := func(s string) int {
		if _, frac, ok := strings.Cut(s, "."); ok {
			return len(frac)
		}
		return 0
	}
	if num, ok := strings.CutSuffix(old, "Ki"); ok {
		sep := ""
		if strings.HasSuffix(num, " ") {
			sep = " "
		}
		num = strings.TrimSpace(num)
		return strconv.FormatFloat(v/1024, 'f', decimals(num), 64) + sep + "Ki"
	}
	if d := decimals(old); d > 0 {
		return strconv.FormatFloat(v, 'f', d, 64)
	}
	return commas(int64(math.Round(v)))
}

// commas prints n with a comma every three digits.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
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

// sameFigure reports whether the documented figure doc, as printed
// ("1,568", "4.363Ki", "137 KiB", "1.10"), is the measured one rounded to
// the digits it shows, or within the tolerance (rel of it, or abs) of it.
func sameFigure(doc string, measured float64, rel, abs float64) bool {
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
	return math.Abs(v*scale-measured) <= max(half, rel*math.Abs(measured), abs)+1e-9
}
