// Command proxylab drives retry libraries through real reverse proxies
// (haproxy, nginx, caddy) while their backends are killed and restarted and
// the proxy is reloaded, and counts, per library: client-visible failures,
// duplicate side effects (a request acted on more than once) and ghost
// effects (acted on, but the client was told it failed).
//
// It needs the proxies installed: bench/proxies/run.sh installs them with
// apt-get, builds this program and runs it. It is not part of CI. See
// bench/proxies/README.md.
//
//	proxylab [flags]                     the harness
//	proxylab backend -addr A -work D     one backend (started by the harness)
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "backend" {
		fs := flag.NewFlagSet("backend", flag.ExitOnError)
		addr := fs.String("addr", "127.0.0.1:0", "listen address (loopback)")
		work := fs.Duration("work", 3*time.Millisecond, "work per request, after its side effect")
		_ = fs.Parse(os.Args[2:])
		if err := runBackend(*addr, *work); err != nil {
			fmt.Fprintln(os.Stderr, "backend:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(harness())
}

// options of the harness.
type options struct {
	proxies  []string
	load     loadConfig
	work     time.Duration
	dir      string
	deadline time.Duration
	rounds   int
}

func harness() int {
	var o options
	proxies := flag.String("proxies", strings.Join(proxyNames, ","), "proxies to run, in order")
	flag.IntVar(&o.load.clients, "clients", 16, "concurrent clients per library")
	flag.IntVar(&o.load.perClient, "per-client", 1000, "at most this many requests per client")
	flag.DurationVar(&o.load.duration, "duration", 14*time.Second, "load time per proxy (the fault schedule needs 13s)")
	flag.DurationVar(&o.load.think, "think", 40*time.Millisecond, "pause between a client's requests")
	flag.DurationVar(&o.load.timeout, "timeout", 10*time.Second, "deadline of one logical request, retries included")
	flag.DurationVar(&o.work, "work", 3*time.Millisecond, "backend work per request")
	flag.StringVar(&o.dir, "dir", "", "work dir for configs, logs and the pgid list (default: a new temp dir)")
	flag.IntVar(&o.rounds, "rounds", 1, "run every proxy this many times; the table sums the rounds")
	flag.DurationVar(&o.deadline, "deadline", 0, "kill everything and fail after this long (default: 40s per proxy and round, plus the load time)")
	flag.Parse()
	o.proxies = strings.Split(*proxies, ",")
	if o.rounds < 1 {
		o.rounds = 1
	}
	if o.deadline <= 0 {
		o.deadline = time.Duration(o.rounds*len(o.proxies)) * (40*time.Second + o.load.duration)
	}

	if o.dir == "" {
		d, err := os.MkdirTemp("", "proxylab-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		o.dir = d
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pgidFile := filepath.Join(o.dir, "pgids")
	ps, err := newProcs(pgidFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Every way out kills what was started: return, a signal, the deadline.
	var once sync.Once
	cleanup := func() {
		once.Do(func() {
			ps.killAll()
			_ = os.Truncate(pgidFile, 0)
		})
	}
	defer cleanup()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintln(os.Stderr, "proxylab: stopped by", s)
		case <-time.After(o.deadline):
			fmt.Fprintln(os.Stderr, "proxylab: deadline", o.deadline, "passed")
		}
		cleanup()
		os.Exit(1)
	}()

	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("# %d clients per library, each at most %d requests over %v, %v apart, %v per request; backend work %v; every 4th request a GET\n",
		o.load.clients, o.load.perClient, o.load.duration, o.load.think, o.load.timeout, o.work)
	fmt.Printf("# faults (from the start of load): %s\n", scheduleText())
	fmt.Printf("# %d round(s) per proxy, summed\n", o.rounds)
	fmt.Printf("# proxies run as user %s, configs and logs in %s\n\n", currentUser(), o.dir)

	var rows []row
	status := 0
	var available []string
	for _, name := range o.proxies {
		version, err := proxyVersion(name)
		if err != nil {
			fmt.Printf("%s: skipped (%v)\n", name, err)
			continue
		}
		fmt.Printf("%s: %s\n", name, version)
		available = append(available, name)
	}
	for round := 1; round <= o.rounds; round++ {
		for _, name := range available {
			r, err := runProxy(name, exe, o, ps)
			ps.killAll()
			if err != nil {
				fmt.Printf("%s, round %d: failed: %v (logs in %s)\n", name, round, err, filepath.Join(o.dir, name))
				status = 1
				continue
			}
			rows = addRows(rows, r)
		}
	}
	fmt.Println()
	printTable(os.Stdout, rows)
	return status
}

// fault is one step of the schedule, at a time from the start of load.
type fault struct {
	at   time.Duration
	what string
	do   func(b *backends, px *proxy) error
}

func killRestart(down time.Duration, which ...int) func(b *backends, px *proxy) error {
	return func(b *backends, _ *proxy) error { return b.killAndRestart(down, which...) }
}

func reload(_ *backends, px *proxy) error { return px.reload() }

// schedule is the same for every proxy: a backend killed and restarted, the
// other one too, both down for 2 s (issue 17), a reload, a kill after the
// reload and a second reload.
var schedule = []fault{
	{2000 * time.Millisecond, "SIGKILL a, restart 200ms later", killRestart(200*time.Millisecond, 0)},
	{4000 * time.Millisecond, "SIGKILL b, restart 200ms later", killRestart(200*time.Millisecond, 1)},
	{6000 * time.Millisecond, "SIGKILL a and b, restart 2s later", killRestart(2*time.Second, 0, 1)},
	{10000 * time.Millisecond, "reload the proxy", reload},
	{11500 * time.Millisecond, "SIGKILL a, restart 200ms later", killRestart(200*time.Millisecond, 0)},
	{12500 * time.Millisecond, "reload the proxy", reload},
}

func scheduleText() string {
	var parts []string
	for _, f := range schedule {
		parts = append(parts, fmt.Sprintf("%.1fs %s", f.at.Seconds(), f.what))
	}
	return strings.Join(parts, "; ")
}

// runProxy runs the whole experiment behind one proxy and returns a row per
// library.
func runProxy(name, exe string, o options, ps *procs) ([]row, error) {
	dir := filepath.Join(o.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "output.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	led := newLedger()
	b := &backends{exe: exe, work: o.work, ports: [2]int{ports[0], ports[1]}, procs: ps, led: led, log: log}
	defer b.finish()
	for i := range b.ports {
		if err := b.start(i); err != nil {
			return nil, err
		}
	}
	px := &proxy{name: name, dir: dir, port: ports[2], admin: ports[3], backs: b.ports, procs: ps, log: log}
	if err := px.start(); err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/orders", px.port)
	if err := waitHealthy(fmt.Sprintf("http://127.0.0.1:%d/health", px.port), 15*time.Second); err != nil {
		return nil, err
	}

	libs := libraries()
	start := time.Now()
	var wg sync.WaitGroup
	for i, l := range libs {
		wg.Add(1)
		go func(i int, l library) {
			defer wg.Done()
			drive(i, l, url, o.load, led)
		}(i, l)
	}
	var faultErr error
	for _, f := range schedule {
		if f.at >= o.load.duration {
			break
		}
		time.Sleep(time.Until(start.Add(f.at)))
		fmt.Fprintf(log, "proxylab: +%.2fs %s\n", time.Since(start).Seconds(), f.what)
		if err := f.do(b, px); err != nil {
			faultErr = fmt.Errorf("%s: %w", f.what, err)
			break
		}
	}
	wg.Wait()
	for _, l := range libs {
		l.client.CloseIdleConnections()
	}
	b.finish()
	if faultErr != nil {
		return nil, faultErr
	}
	return tally(name, libs, led), nil
}

// freePorts finds n free loopback ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitHealthy waits until url answers 200 twice in a row.
func waitHealthy(url string, limit time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	good := 0
	for time.Now().Before(deadline) {
		res, err := c.Get(url)
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				if good++; good == 2 {
					c.CloseIdleConnections()
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not healthy after %v", url, limit)
}
