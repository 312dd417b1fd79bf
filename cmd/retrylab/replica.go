package main

import (
	"context"
	"fmt"
	"sync/atomic"
)

// replicas is the number of backends behind the bad replica's round robin;
// the first of them fails every request it gets.
const replicas = 3

// roundRobin returns a fails function for flakyRun that models replicas
// backends behind a round-robin load balancer, one of which is bad: every
// replicas-th request, in the order they arrive, goes to it and fails at
// once. The servers have room: nothing else fails, whatever the load.
func roundRobin() func() bool {
	var next atomic.Uint64
	return func() bool { return next.Add(1)%replicas == 0 }
}

// runReplica runs the bad replica: the flaky scenario's clients and load,
// against three backends behind a round robin, one of which fails every
// request at once (a bad pod behind a Kubernetes Service that no health
// check caught yet). A third of the attempts fail; each retry has a
// two-in-three chance. Each policy gets a fresh server and fresh clients.
func runReplica(ctx context.Context, cfg config) (flakyResult, error) {
	d := max(cfg.duration/4, flakyPeriod)
	r := flakyResult{clients: cfg.clients, duration: d, buckets: int(d / bucketWidth)}
	for _, p := range metastablePolicies() {
		row, err := flakyRun(ctx, cfg, r, p, roundRobin())
		if err != nil {
			return r, err
		}
		r.rows = append(r.rows, row)
	}
	return r, nil
}

// replicaSection turns the result into the report's section.
func replicaSection(r flakyResult, cfg config) section {
	s := flakySection(r, cfg)
	s.id = "replica"
	s.title = "One bad replica: three backends behind a round robin, one failing fast"
	s.notes[0] = fmt.Sprintf("%d clients, each sending a GET every %v (open loop) for %v, to %d backends behind a round robin; "+
		"one of them answers every request it gets with 503 at once, the others with 200: a third of the attempts fail, "+
		"whatever the load.", r.clients, flakyPeriod, r.duration, replicas)
	s.notes[1] = "Retries cannot hurt these servers and each has a two-in-three chance: the question is what each policy spends. " +
		"Without a budget, 3 retries cost 1 + 1/3 + 1/9 + 1/27 = 1.48 attempts per request, for 98.8% success."
	s.charts[0].file = "replica.svg"
	s.charts[0].svg = flakyChart(r, "One bad replica of three: requests per 100ms at the server")
	return s
}
