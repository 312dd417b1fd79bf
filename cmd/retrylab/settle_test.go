package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSettled(t *testing.T) {
	const ms = time.Millisecond
	// A fault ends at 1000ms; clients send every 500ms until 4000ms.
	ok := func(at, latency time.Duration) outcome { return outcome{at: at * ms, latency: latency * ms, ok: true} }
	fail := func(at, latency time.Duration) outcome { return outcome{at: at * ms, latency: latency * ms} }
	tests := []struct {
		name string
		give []outcome
		want time.Duration
		in   bool
	}{
		{"nothing happened", []outcome{ok(100, 10), ok(1200, 10), ok(3800, 10)}, 0, true},
		{"backlog answered late, with success", []outcome{ok(900, 1700), ok(1200, 10)}, 1600 * ms, true},
		{"backlog answered late, with failure", []outcome{fail(900, 2000), ok(1200, 10)}, 1900 * ms, true},
		{"backlog answered after the load", []outcome{ok(800, 3500), ok(3900, 10)}, 3300 * ms, true},
		{"failures after the end", []outcome{fail(950, 10), fail(1100, 5), fail(1400, 5), ok(1600, 5)}, 400*ms + 1, true},
		{"the last period failed", []outcome{ok(900, 10), fail(3600, 5)}, 0, false},
		{"never served again", []outcome{fail(1100, 5), fail(2000, 5), fail(3900, 5)}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, in := settled(tt.give, 1000*ms, 500*ms, 4000*ms)
			assert.Equal(t, tt.in, in)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSettledCell(t *testing.T) {
	cfg := defaultConfig()
	cfg.timescale = 0.25
	assert.Equal(t, "not in run", settledCell(cfg, time.Second, false))
	assert.Equal(t, "1.6s", settledCell(cfg, 400*time.Millisecond+3*time.Millisecond, true)) // 1.612s model
	assert.Equal(t, "40ms", settledCell(cfg, 10*time.Millisecond, true))
}
