package main

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
)

// The alert rules and their promtool unit tests (../alerts).
var (
	rulesFile = filepath.Join("..", "alerts", "retryhttp.rules.yml")
	testsFile = filepath.Join("..", "alerts", "retryhttp.rules.test.yml")
)

var (
	// metricName is a name that starts with retryhttp_: in the two files,
	// once labels are cut out (withoutLabels), a series name as PromQL or a
	// test's input series spells it. (The rules' group is "retryhttp",
	// their alerts "Retryhttp…", the files "retryhttp.rules…": none
	// matches.)
	metricName = regexp.MustCompile(`\bretryhttp_[a-zA-Z0-9_]+`)
	// labelLists are where PromQL and the tests' series name labels:
	// between braces (matchers, a series' labels; the rules' templates
	// too), and in the lists of by, without, on, ignoring, group_left and
	// group_right.
	labelLists = regexp.MustCompile(`\{[^{}]*\}|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	// selector is a series name with its labels or matchers.
	selector = regexp.MustCompile(`\b(retryhttp_[a-zA-Z0-9_]+)\{([^{}]*)\}`)
	// byClause is the label list of a PromQL "by (…)".
	byClause = regexp.MustCompile(`\bby\s*\(([^()]*)\)`)
	// labelName is a label's name in {a="…",b!~"…"}.
	labelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*[=!]~?\s*"(?:[^"\\]|\\.)*"`)
)

// withoutLabels returns text with its label lists (labelLists) cut out,
// so that the names left are metrics' names.
func withoutLabels(text string) string {
	return labelLists.ReplaceAllString(text, " ")
}

// TestAlertNames checks the names the alert rules and their unit tests use
// against a scrape of the example's exporter (newMeterProvider, the
// OpenTelemetry Prometheus exporter), after traffic that makes every
// series the rules watch: retries, a budget refusal, an open circuit. Every
// metric name in the two files, suffixes included (_total, _bucket, a unit
// such as _seconds), must be one the exporter writes; every label of a
// test's input series must be one the exporter writes on that metric; and
// every label a rule groups by must be on each metric the rule reads.
// promtool checks the rules' syntax and behaviour, not that the series
// exist: a name that drifts from the exporter's makes the alert silent
// forever, and only this test fails.
func TestAlertNames(t *testing.T) {
	scraped := scrapeAfterStorm(t)
	rules := readFile(t, rulesFile)
	tests := readFile(t, testsFile)

	for file, text := range map[string]string{rulesFile: rules, testsFile: tests} {
		names := metricName.FindAllString(withoutLabels(text), -1)
		if len(names) == 0 {
			t.Errorf("%s: no retryhttp_ metric name", file)
		}
		for _, name := range names {
			if _, ok := scraped[name]; !ok {
				t.Errorf("%s: %s is not a series the exporter writes; it writes:\n%s", file, name, strings.Join(keys(scraped), "\n"))
			}
		}
		// The labels of a test's input series, or of a rule's matchers.
		for _, m := range selector.FindAllStringSubmatch(text, -1) {
			have, ok := scraped[m[1]]
			if !ok {
				continue // reported above
			}
			for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
				if !have[l[1]] {
					t.Errorf("%s: %s{%s}: the exporter writes no label %s on %s (it writes %s)", file, m[1], m[2], l[1], m[1], strings.Join(keys(have), ", "))
				}
			}
		}
	}
	if !strings.Contains(tests, "input_series:") || len(selector.FindAllString(tests, -1)) == 0 {
		t.Errorf("%s: no input series", testsFile)
	}

	// Each rule, from its "- alert:" to the next: the labels it groups by
	// must be on every metric it reads.
	alerts := strings.Split(rules, "- alert:")[1:]
	if len(alerts) == 0 {
		t.Errorf("%s: no alert", rulesFile)
	}
	for _, rule := range alerts {
		alert, _, _ := strings.Cut(strings.TrimSpace(rule), "\n")
		for _, by := range byClause.FindAllStringSubmatch(rule, -1) {
			for _, label := range strings.Split(by[1], ",") {
				label = strings.TrimSpace(label)
				for _, name := range metricName.FindAllString(withoutLabels(rule), -1) {
					if have, ok := scraped[name]; ok && !have[label] {
						t.Errorf("%s: %s groups by %s, which the exporter does not write on %s", rulesFile, alert, label, name)
					}
				}
			}
		}
	}
}

// scrapeAfterStorm sends requests that make every otelretryhttp series the
// alert rules read, through transports whose metrics go to the example's
// exporter, then scrapes the exporter's handler as Prometheus would and
// returns the retryhttp series' names, each with the names of its labels.
func scrapeAfterStorm(t *testing.T) map[string]map[string]bool {
	t.Helper()
	backend := httptest.NewServer(flaky()) // /flaky/N: two 503s, then 200; any other path: 503
	defer backend.Close()

	registry := prometheus.NewRegistry()
	mp, err := newMeterProvider(registry)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mp.Shutdown(context.Background()) }()
	metrics, err := otelretryhttp.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	noWait := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })

	// Retries and a budget refusal: a bucket of two tokens, spent on the
	// two retries of /flaky/1; the retry of /down finds none.
	budgeted := retryhttp.New(metrics, noWait,
		retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 2, NoParking: true})))
	defer budgeted.CloseIdleConnections()
	// An open circuit: the first failure opens it.
	breaker := retryhttp.New(metrics, noWait, retryhttp.WithMaxRetries(0),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour}))
	defer breaker.CloseIdleConnections()

	for _, r := range []struct {
		tr   http.RoundTripper
		path string
	}{{budgeted, "/flaky/1"}, {budgeted, "/down"}, {breaker, "/down"}} {
		client := &http.Client{Transport: r.tr, Timeout: 10 * time.Second}
		if err := getAndClose(client, backend.URL+r.path); err != nil {
			t.Fatal(err)
		}
	}

	scrape := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	defer scrape.Close()
	res, err := http.Get(scrape.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	scraped := map[string]map[string]bool{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "retryhttp_") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		if scraped[name] == nil {
			scraped[name] = map[string]bool{}
		}
		if i := strings.IndexByte(line, '{'); i == len(name) {
			for _, l := range labelName.FindAllStringSubmatch(line[i:strings.LastIndexByte(line, '}')], -1) {
				scraped[name][l[1]] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// The traffic above must have made the series the rules read; if it
	// did not, a missing name would be the test's fault, not the rules'.
	for _, name := range []string{"retryhttp_client_budget_refusals_total", "retryhttp_client_circuit_state"} {
		if scraped[name] == nil {
			t.Fatalf("the scrape has no %s: the test's traffic no longer makes it", name)
		}
	}
	return scraped
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
