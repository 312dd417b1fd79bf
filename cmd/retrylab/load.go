package main

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// outcome is what one client request came to.
type outcome struct {
	latency time.Duration
	ok      bool
	at      time.Duration // when it was sent, from the load's start (drive only)
}

// drive sends the load of a run: clients clients, each sending one request
// every period from a random phase in [0, period), from start until
// start+duration, whatever happened to the earlier ones (an open loop: users
// keep arriving). send makes one request for client i and reports success.
// It returns the outcome of every request once all have ended.
func drive(ctx context.Context, start time.Time, clients int, period, duration time.Duration, seed uint64,
	send func(ctx context.Context, client int) bool) []outcome {
	type shot struct {
		at     time.Duration
		client int
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var shots []shot
	for i := range clients {
		for at := time.Duration(rng.Float64() * float64(period)); at < duration; at += period {
			shots = append(shots, shot{at, i})
		}
	}
	slices.SortFunc(shots, func(a, b shot) int { return int(a.at - b.at) })

	outcomes := make([]outcome, len(shots))
	var wg sync.WaitGroup
	for k, s := range shots {
		if err := sleep(ctx, time.Until(start.Add(s.at))); err != nil {
			outcomes = outcomes[:k]
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			ok := send(ctx, s.client)
			outcomes[k] = outcome{latency: time.Since(t0), ok: ok, at: s.at}
		}()
	}
	wg.Wait()
	return outcomes
}

// summary is what the clients of a run saw.
type summary struct {
	requests int
	success  float64 // share of requests that succeeded
	p50, p99 time.Duration
}

func summarize(outcomes []outcome) summary {
	s := summary{requests: len(outcomes)}
	if len(outcomes) == 0 {
		return s
	}
	lat := make([]time.Duration, len(outcomes))
	ok := 0
	for i, o := range outcomes {
		lat[i] = o.latency
		if o.ok {
			ok++
		}
	}
	slices.Sort(lat)
	s.success = float64(ok) / float64(len(outcomes))
	s.p50, s.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	return s
}

// percentile returns the p-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// summarize summarizes outcomes with latencies in model time.
func (c config) summarize(outcomes []outcome) summary {
	s := summarize(outcomes)
	s.p50, s.p99 = c.model(s.p50), c.model(s.p99)
	return s
}

// loadTail is the number of buckets counted after the load stops: long
// enough for the last requests' retries to end.
var loadTail = int((clientLimit + time.Second) / bucketWidth)

// load is one policy's run of a load scenario, in model time.
type load struct {
	handler   handlerFunc
	start     time.Time // real time
	buckets   int       // of the load, besides loadTail
	period    time.Duration
	duration  time.Duration
	waitScale float64            // multiplies the policy's waits, besides the timescale; 0 means 1
	extra     []retryhttp.Option // applied to every client's transport after the policy's
}

// loadRun is what runLoad saw: the server, still open for its series to be
// read (the caller closes it), the clients' outcomes, how faithfully the
// machine ran it, and how many requests the retry budget refused a retry.
type loadRun struct {
	srv      *server
	outcomes []outcome
	check    machineCheck
	refused  int64 // requests that ended on a retry the budget refused
}

// runLoad serves l.handler from l.start, with buckets of bucketWidth
// (l.buckets of them, plus loadTail), and drives cfg.clients clients
// following p against it, each sending a GET every l.period for l.duration.
func runLoad(ctx context.Context, cfg config, p policy, l load) (loadRun, error) {
	srv, err := startServer(l.handler, l.start, cfg.scale(bucketWidth), l.buckets+loadTail)
	if err != nil {
		return loadRun{}, err
	}
	waitScale := cfg.timescale
	if l.waitScale > 0 {
		waitScale *= l.waitScale
	}
	probe := startLagProbe(cfg.scale(lagTick))
	base := newBase()
	defer base.CloseIdleConnections()
	var refused atomic.Int64
	count := retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
		if d.Reason == retryhttp.StopBudgetRefused {
			refused.Add(1)
		}
	}})
	clients := newClients(p, base, cfg.clients, waitScale, cfg.scale(clientLimit), append(slices.Clip(l.extra), count))
	outcomes := drive(ctx, l.start, cfg.clients, cfg.scale(l.period), cfg.scale(l.duration), cfg.seed,
		func(ctx context.Context, i int) bool { return get(ctx, clients[i], srv.URL) == nil })
	return loadRun{srv, outcomes, newMachineCheck(cfg, probe.finish()), refused.Load()}, nil
}
