// Command example shows the metrics of otelretryhttp in Prometheus form,
// with no setup:
//
//	cd otelretryhttp/example && go run .
//
// It starts a flaky HTTP server on loopback, sends requests to it through a
// retryhttp.Transport whose metrics go to an OpenTelemetry Prometheus
// exporter, serves that exporter's /metrics on loopback, scrapes it once
// and prints the retryhttp series, with the retry ratio and the request
// amplification that the alert rules of ../alerts watch. It also logs
// each retry and give-up with log/slog. It exits with status 1 if a series
// is missing.
//
// It is a module of its own so that otelretryhttp does not depend on the
// Prometheus client.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run() error {
	// 1. A flaky backend: /flaky/N fails its first two attempts with 503;
	// /down always answers 503.
	backend := httptest.NewServer(flaky())
	defer backend.Close()

	// 2. Metrics: an OpenTelemetry meter provider whose reader is a
	// Prometheus exporter, registered in a registry of our own.
	registry := prometheus.NewRegistry()
	mp, err := newMeterProvider(registry)
	if err != nil {
		return err
	}
	defer func() { _ = mp.Shutdown(context.Background()) }()
	metrics, err := otelretryhttp.New(mp)
	if err != nil {
		return err
	}

	// 3. The client: metrics, and a log record per retry and give-up.
	logger := slog.New(slog.NewTextHandler(os.Stdout, nil))
	tr := retryhttp.New(metrics,
		retryhttp.WithLogger(logger),
		retryhttp.WithDelayFn(func(a retryhttp.Attempt) time.Duration { return time.Duration(a.Count) * 5 * time.Millisecond }))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	fmt.Println("== requests (log records of retries and give-ups)")
	for i := 1; i <= 5; i++ {
		if err := getAndClose(client, fmt.Sprintf("%s/flaky/%d?token=secret", backend.URL, i)); err != nil {
			return err
		}
	}
	if err := getAndClose(client, backend.URL+"/down"); err != nil {
		return err
	}

	// 4. The exporter's endpoint, on loopback, scraped once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	scrapeURL := "http://" + l.Addr().String() + "/metrics"

	series, err := scrape(scrapeURL)
	if err != nil {
		return err
	}
	fmt.Printf("\n== %s (retryhttp series, histogram buckets left out)\n", scrapeURL)
	for _, s := range series {
		if !strings.HasSuffix(s.name, "_bucket") {
			fmt.Println(s.line)
		}
	}

	// 5. What the storm alerts compute, from the same numbers.
	requests := sum(series, "retryhttp_client_requests_total")
	attempts := sum(series, "retryhttp_client_attempts_total")
	retries := sum(series, "retryhttp_client_retries_total")
	if requests == 0 || attempts == 0 || retries == 0 {
		return fmt.Errorf("missing series: requests %v, attempts %v, retries %v", requests, attempts, retries)
	}
	fmt.Printf("\n== retry ratio %.2f (retries per request), amplification %.2f (attempts per request)\n",
		retries/requests, attempts/requests)
	return nil
}

// newMeterProvider returns a meter provider whose reader is an
// OpenTelemetry Prometheus exporter registered in registry: the series
// TestAlertNames checks the alert rules' names against are those it writes.
func newMeterProvider(registry prometheus.Registerer) (*sdkmetric.MeterProvider, error) {
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, err
	}
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)), nil
}

// flaky fails the first two attempts of each /flaky/N path, and every
// attempt of any other path.
func flaky() http.Handler {
	var mu sync.Mutex
	seen := map[string]int{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		if !strings.HasPrefix(r.URL.Path, "/flaky/") || n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
}

func getAndClose(c *http.Client, url string) error {
	res, err := c.Get(url)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Body.Close()
}

type sample struct {
	line, name string
	value      float64
}

// scrape fetches url and returns its retryhttp samples.
func scrape(url string) ([]sample, error) {
	res, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var out []sample
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "retryhttp_") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		out = append(out, sample{line, name, v})
	}
	return out, sc.Err()
}

func sum(series []sample, name string) float64 {
	total := 0.0
	for _, s := range series {
		if s.name == name {
			total += s.value
		}
	}
	return total
}
