package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// The random scenario draws storms nobody named from a seed (drawStorm),
// runs each with the four policies of randomPolicies, each policy's run in
// a process of its own (random_child.go), and judges the defaults on each
// storm (judge). docs/retrylab.md#storms-drawn-at-random describes the
// distribution; the draws below are its source of truth.

// Fault kinds of a storm: what the host does besides answering.
const (
	faultOutage    = "outage"    // spells of 503 or connection resets
	faultRandom    = "random"    // a share of the requests fails at random, whatever the load
	faultRateLimit = "ratelimit" // a token bucket answering 429, with or without Retry-After
	faultCapacity  = "capacity"  // a fixed number of workers behind a FIFO queue; its capacity may halve for a spell
	faultSlow      = "slow"      // spells during which every answer takes longer
)

// faultWeights are the kinds' probabilities, in this order.
var faultWeights = []struct {
	kind   string
	weight float64
}{
	{faultOutage, 0.30}, {faultRandom, 0.20}, {faultRateLimit, 0.15}, {faultCapacity, 0.20}, {faultSlow, 0.15},
}

// Bounds of the distribution (docs/retrylab.md#storms-drawn-at-random).
const (
	randomOpenShare   = 0.6                     // of the storms, open loops
	randomMinRate     = 100.0                   // open loops' Poisson arrivals per second, at least
	randomMaxRate     = 400.0                   // and at most; also a closed loop's most requests per second
	randomMinLoad     = 1500 * time.Millisecond // open loops' arrivals last this long at least
	randomMaxLoad     = 3 * time.Second         // before outage or slow spells lengthen it
	randomMaxSpan     = 8 * time.Second         // no storm's load (or a closed loop's nominal time) is longer
	randomMinWorkers  = 5                       // of a closed loop
	randomMaxWorkers  = 100                     //
	randomMinSpell    = 50 * time.Millisecond   // an outage's spell
	randomMaxSpell    = 3500 * time.Millisecond //
	randomMaxOutage   = 4 * time.Second         // the spells of a storm's outage in all, about
	randomMaxFail     = 0.6                     // share failing at random, at most
	randomClientGuard = 30 * time.Second        // http.Client.Timeout of every client: a guard, not a deadline
)

// spell is a time during which a host fails (or is slow, or has its
// capacity halved), from the load's start.
type spell struct {
	From time.Duration `json:"from"`
	To   time.Duration `json:"to"`
}

// storm is one storm drawn at random: the load, the caller's deadlines and
// the host's faults. Durations are nanoseconds in JSON. The child process
// that runs a policy reads it from its standard input.
type storm struct {
	Seed  uint64 `json:"seed"`
	Index int    `json:"storm"` // from 1

	// The load: an open loop (Poisson arrivals at Rate for Load) or a
	// closed loop (Workers pulling Requests from a queue, one request in
	// flight each, with an exponential think time of mean Think between a
	// worker's requests), stopped at Cap.
	Open     bool          `json:"open"`
	Rate     float64       `json:"rate,omitempty"`
	Load     time.Duration `json:"load,omitempty"`
	Workers  int           `json:"workers,omitempty"`
	Requests int           `json:"requests,omitempty"`
	Think    time.Duration `json:"think,omitempty"`
	Cap      time.Duration `json:"cap,omitempty"`
	Warm     bool          `json:"warm"` // one successful GET before the load

	// The caller: a context deadline per request, and a timeout per
	// attempt (WithAttemptTimeout), 0 for none.
	Deadline       time.Duration `json:"deadline,omitempty"`
	AttemptTimeout time.Duration `json:"attempt_timeout,omitempty"`

	// The host: it answers 200 after Work (×0.5-1.5 at random; exactly
	// Work behind a capacity's queue), but for its Fault.
	Work       time.Duration `json:"work"`
	Fault      string        `json:"fault"`
	Spells     []spell       `json:"spells,omitempty"`      // outage, slow: the spells; capacity: the trigger, halving it
	Reset      bool          `json:"reset,omitempty"`       // outage: reset connections, else 503
	RetryAfter int           `json:"retry_after,omitempty"` // seconds, on an outage's 503 or a limiter's 429; 0: none
	FailShare  float64       `json:"fail_share,omitempty"`  // failing at random (503 at once): random, or besides another fault
	LimitRate  float64       `json:"limit_rate,omitempty"`  // ratelimit: tokens per second
	LimitBurst int           `json:"limit_burst,omitempty"` // and the bucket's size
	CapWorkers int           `json:"cap_workers,omitempty"` // capacity: requests worked on at once
	CapQueue   int           `json:"cap_queue,omitempty"`   // places in its queue; a request finding it full gets 503
	ShedCost   time.Duration `json:"shed_cost,omitempty"`   // of work per shed request
	SlowBy     time.Duration `json:"slow_by,omitempty"`     // slow: added to every answer during a spell
}

// drawStorm draws storm index (from 1) of seed, from a PCG seeded with both:
// the same seed and index give the same storm on any machine.
func drawStorm(seed uint64, index int) storm {
	rng := rand.New(rand.NewPCG(seed, uint64(index)))
	s := storm{Seed: seed, Index: index}
	s.Open = rng.Float64() < randomOpenShare
	u := rng.Float64()
	for _, f := range faultWeights {
		s.Fault = f.kind
		if u < f.weight {
			break
		}
		u -= f.weight
	}
	s.Warm = rng.Float64() < 0.8
	if s.Fault == faultCapacity {
		s.Work = millis(uniform(rng, 5, 30))
	} else {
		s.Work = millis(logUniform(rng, 1, 300))
	}
	// span is the nominal time of the load: an open loop's arrivals, a
	// closed loop's batch at its unhindered pace.
	span := millis(uniform(rng, msOf(randomMinLoad), msOf(randomMaxLoad)))
	if s.Open {
		s.Rate = math.Round(uniform(rng, randomMinRate, randomMaxRate))
	} else {
		s.Workers = int(math.Round(logUniform(rng, randomMinWorkers, randomMaxWorkers)))
		if rng.Float64() >= 0.3 {
			s.Think = millis(logUniform(rng, 1, 200))
		}
		// At most randomMaxRate requests per second: the machine's 2
		// cores serve that and the clients' side.
		if floor := time.Duration(float64(s.Workers)/randomMaxRate*float64(time.Second)) - s.Work; s.Think < floor {
			s.Think = floor.Round(time.Millisecond)
		}
	}
	if rng.Float64() < 0.5 {
		s.Deadline = millis(logUniform(rng, 1000, 5000))
	}

	switch s.Fault {
	case faultOutage:
		s.Spells = drawSpells(rng, randomMinSpell, randomMaxSpell, 1+rng.IntN(5), randomMaxOutage)
		s.Reset = rng.Float64() < 0.5
		if !s.Reset && rng.Float64() < 0.25 {
			s.RetryAfter = 1
		}
		span, s.Spells = fitSpells(rng, span, s.Spells)
	case faultRandom:
		s.FailShare = round3(uniform(rng, 0, randomMaxFail))
	case faultSlow:
		s.Spells = drawSpells(rng, 200*time.Millisecond, 2*time.Second, 1+rng.IntN(3), 3*time.Second)
		s.SlowBy = millis(logUniform(rng, 200, 2000))
		span, s.Spells = fitSpells(rng, span, s.Spells)
		if rng.Float64() < 0.75 {
			s.AttemptTimeout = (s.Work*3/2 + millis(logUniform(rng, 50, 800))).Round(time.Millisecond)
		}
	case faultCapacity:
		// The offered load over the capacity: an open loop's arrivals,
		// or a closed loop's workers at their unhindered pace (the
		// requests they would have in flight at once), which a capacity
		// below slows down.
		if s.Open {
			s.CapWorkers = max(1, int(math.Round(s.Rate*s.Work.Seconds()/uniform(rng, 0.6, 1.05))))
		} else {
			busy := float64(s.Workers) * float64(s.Work) / float64(s.Work+s.Think)
			s.CapWorkers = max(1, int(math.Round(busy/uniform(rng, 0.6, 1.5))))
		}
		capRate := float64(s.CapWorkers) / s.Work.Seconds()
		s.CapQueue = max(1, int(math.Round(capRate*uniform(rng, 0.05, 0.6))))
		s.ShedCost = time.Duration(uniform(rng, 0, 2) * float64(time.Millisecond)).Round(100 * time.Microsecond)
		if rng.Float64() < 0.7 {
			from := time.Duration(uniform(rng, 0.2, 0.5) * float64(span)).Round(time.Millisecond)
			s.Spells = []spell{{from, from + millis(uniform(rng, 300, 1500))}}
			span = max(span, s.Spells[0].To+500*time.Millisecond)
		}
		if rng.Float64() < 0.6 {
			s.AttemptTimeout = millis(uniform(rng, 100, 600))
		}
	case faultRateLimit:
		if rng.Float64() < 0.5 {
			s.RetryAfter = 1 + rng.IntN(3)
		}
		s.LimitBurst = 5 + rng.IntN(46)
	}
	if s.Fault != faultRandom && rng.Float64() < 0.25 {
		s.FailShare = round3(uniform(rng, 0, 0.3))
	}
	if s.Deadline > 0 {
		// A deadline the host's plain answer cannot meet is no storm.
		s.Deadline = max(s.Deadline, 4*s.Work+200*time.Millisecond)
	}
	span = min(span, randomMaxSpan)

	if s.Open {
		s.Load = span
		if s.Fault == faultRateLimit {
			s.LimitRate = math.Round(s.Rate * uniform(rng, 0.4, 1))
		}
		return s
	}
	per := s.Work + s.Think // a worker's time per request, unhindered
	if s.Fault == faultCapacity {
		// Behind the queue, the workers share CapWorkers.
		per = max(per, time.Duration(float64(s.Work)*float64(s.Workers)/float64(s.CapWorkers)))
	}
	pace := float64(s.Workers) / per.Seconds() // requests per second, unhindered
	s.Requests = max(s.Workers, int(math.Round(pace*span.Seconds())), min(50, int(math.Round(pace*randomMaxSpan.Seconds()))))
	if s.Fault == faultRateLimit {
		s.LimitRate = math.Max(1, math.Round(pace*uniform(rng, 0.2, 0.8)))
		s.Requests = max(20, s.LimitBurst+int(math.Round(s.LimitRate*span.Seconds())))
		span = max(span, time.Duration(float64(s.Requests-s.LimitBurst)/s.LimitRate*float64(time.Second)))
	}
	s.Cap = (2*span + 10*time.Second).Round(time.Second)
	return s
}

// drawSpells draws up to n spells of lo to hi (log-uniform), stopping once
// they add up to total, the first from 200-800ms into the load and each
// 100ms-1.5s (log-uniform) after the last.
func drawSpells(rng *rand.Rand, lo, hi time.Duration, n int, total time.Duration) []spell {
	var spells []spell
	at, sum := millis(uniform(rng, 200, 800)), time.Duration(0)
	for range n {
		length := millis(logUniform(rng, msOf(lo), msOf(hi)))
		spells = append(spells, spell{at, at + length})
		sum += length
		at += length + millis(logUniform(rng, 100, 1500))
		if sum >= total {
			break
		}
	}
	return spells
}

// fitSpells returns span lengthened, if need be, to end 300ms-1s after
// the last spell, and no longer than randomMaxSpan, and the spells within
// it (those beyond are cut).
func fitSpells(rng *rand.Rand, span time.Duration, spells []spell) (time.Duration, []spell) {
	last := spells[len(spells)-1].To
	span = min(randomMaxSpan, max(span, last+millis(uniform(rng, 300, 1000))))
	var kept []spell
	for _, sp := range spells {
		if sp.From < span {
			kept = append(kept, spell{sp.From, min(sp.To, span)})
		}
	}
	return span, kept
}

func uniform(rng *rand.Rand, lo, hi float64) float64 { return lo + rng.Float64()*(hi-lo) }

func logUniform(rng *rand.Rand, lo, hi float64) float64 {
	return math.Exp(uniform(rng, math.Log(lo), math.Log(hi)))
}

// millis returns v milliseconds, rounded to the millisecond.
func millis(v float64) time.Duration { return time.Duration(math.Round(v)) * time.Millisecond }

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// secsShort formats d in seconds, to the millisecond, without trailing
// zeros: "1.2", "0.05".
func secsShort(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Milliseconds())/1000, 'f', -1, 64)
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// failing reports whether at (from the load's start) falls in a spell.
func (s storm) failing(at time.Duration) bool {
	for _, sp := range s.Spells {
		if at >= sp.From && at < sp.To {
			return true
		}
	}
	return false
}

// String describes the storm in a line.
func (s storm) String() string {
	var b strings.Builder
	if s.Open {
		fmt.Fprintf(&b, "open loop, %.0f req/s Poisson for %v", s.Rate, s.Load)
	} else {
		fmt.Fprintf(&b, "closed loop, %d requests from %d workers", s.Requests, s.Workers)
		if s.Think > 0 {
			fmt.Fprintf(&b, ", think %v", s.Think)
		}
		fmt.Fprintf(&b, ", stopped at %v", s.Cap)
	}
	if !s.Warm {
		b.WriteString(", cold")
	}
	if s.Deadline > 0 {
		fmt.Fprintf(&b, "; deadline %v", s.Deadline)
	} else {
		b.WriteString("; no deadline")
	}
	if s.AttemptTimeout > 0 {
		fmt.Fprintf(&b, ", attempt timeout %v", s.AttemptTimeout)
	}
	fmt.Fprintf(&b, "; host %v", s.Work)
	switch s.Fault {
	case faultOutage:
		how := "503"
		if s.Reset {
			how = "resets"
		} else if s.RetryAfter > 0 {
			how = fmt.Sprintf("503 Retry-After: %d", s.RetryAfter)
		}
		fmt.Fprintf(&b, "; outage (%s) in %s", how, spellsString(s.Spells))
	case faultRandom:
		fmt.Fprintf(&b, "; %s fail at random", pct(s.FailShare))
	case faultSlow:
		fmt.Fprintf(&b, "; +%v in %s", s.SlowBy, spellsString(s.Spells))
	case faultCapacity:
		fmt.Fprintf(&b, "; capacity %d workers (%.0f/s), queue %d, shed cost %v", s.CapWorkers,
			float64(s.CapWorkers)/s.Work.Seconds(), s.CapQueue, s.ShedCost)
		if len(s.Spells) > 0 {
			fmt.Fprintf(&b, ", halved in %s", spellsString(s.Spells))
		}
	case faultRateLimit:
		fmt.Fprintf(&b, "; limiter %g/s burst %d, 429 ", s.LimitRate, s.LimitBurst)
		if s.RetryAfter > 0 {
			fmt.Fprintf(&b, "Retry-After: %d", s.RetryAfter)
		} else {
			b.WriteString("without Retry-After")
		}
	}
	if s.Fault != faultRandom && s.FailShare > 0 {
		fmt.Fprintf(&b, "; and %s fail at random", pct(s.FailShare))
	}
	return b.String()
}

// spellsString formats spells: "2 spells (1.2s in all): 0.3-0.5s, 1-2s".
func spellsString(spells []spell) string {
	var sum time.Duration
	parts := make([]string, len(spells))
	for i, sp := range spells {
		sum += sp.To - sp.From
		parts[i] = fmt.Sprintf("%s-%ss", secsShort(sp.From), secsShort(sp.To))
	}
	return fmt.Sprintf("%s (%v in all): %s", plural(len(spells), "spell"), sum, strings.Join(parts, ", "))
}
