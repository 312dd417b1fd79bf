// Package otelretryhttp records the metrics of a retryhttp.Transport with
// OpenTelemetry: logical requests and their outcomes, attempts, retries by
// cause, final failures, retry-budget refusals, waits in the retry budget
// (parked retries, the pause lane, held first attempts) and each host's
// window, circuit states, the delays chosen before retries, the time those
// waits lasted and the attempts per request; and, with SpanEvents,
// writes each request's retries onto its trace span.
//
// It lives in a module of its own so that the core module does not pull in
// OpenTelemetry; it is built only on the core's public hooks
// ([retryhttp.WithHooks], all four of [retryhttp.Hooks]), which it adds to
// those of the transport, without replacing them:
//
//	metrics, err := otelretryhttp.New(meterProvider)
//	if err != nil {
//		return err
//	}
//	client := &http.Client{Transport: retryhttp.New(metrics)}
//
// The module's [README] has a complete program (a meter provider, a reader,
// the metrics read back) and the replace lines a local clone needs; the
// [observability guide] lists the instruments, with Prometheus queries and
// alert rules that detect a retry storm.
//
// [README]: https://github.com/seed2409de8f/retryhttp/blob/main/otelretryhttp/README.md
// [observability guide]: https://github.com/seed2409de8f/retryhttp/blob/main/docs/observability.md#metrics
package otelretryhttp

import (
	"context"
	"errors"
	"hash/maphash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/seed2409de8f/retryhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of the instruments: the import path
// of this package.
const ScopeName = "github.com/seed2409de8f/retryhttp/otelretryhttp"

// Names of the instruments (docs/observability.md has their units and
// attributes).
const (
	// RequestsName counts logical requests, by outcome.
	RequestsName = "retryhttp.client.requests"
	// AttemptsName counts attempts sent, retries and hedges included.
	AttemptsName = "retryhttp.client.attempts"
	// RetriesName counts decisions to retry or hedge, by cause: a retry
	// decided while the budget had a token, then refused by it after its
	// delay, is counted here and in BudgetRefusalsName, though not sent.
	RetriesName = "retryhttp.client.retries"
	// FailuresName counts logical requests that ended in failure.
	FailuresName = "retryhttp.client.failures"
	// BudgetRefusalsName counts requests whose retry the budget refused.
	BudgetRefusalsName = "retryhttp.client.budget.refusals"
	// CircuitStateName gauges each host's circuit: 0 closed, 1 half-open,
	// 2 open.
	CircuitStateName = "retryhttp.client.circuit.state"
	// RetryDelayName is the histogram of the waits before retries, in
	// seconds.
	RetryDelayName = "retryhttp.client.retry.delay"
	// AttemptsPerRequestName is the histogram of attempts per logical
	// request.
	AttemptsPerRequestName = "retryhttp.client.attempts_per_request"
	// ParkedName counts the events of waits in the retry budget, by
	// ParkEventKey: parked, released or dropped (retryhttp.ParkEvent):
	// parked retries, and also every wait in a host's pause lane
	// (a 429's retry, outage or not) and every first attempt held by
	// WithHoldDuringPause. No attribute tells them apart
	// (docs/observability.md).
	ParkedName = "retryhttp.client.retries.parked"
	// ParkWaitName is the histogram of the time those waits lasted (the
	// pause lane's and held first attempts' included), in seconds, by
	// ParkEventKey (released or dropped).
	ParkWaitName = "retryhttp.client.park.wait"
	// ParkWindowName gauges each host's window: the parked retries it lets
	// be in flight at once.
	ParkWindowName = "retryhttp.client.park.window"

	// QuotaHoldsName counts the holds of requests whose advertised quota
	// was spent (retryhttp.Hooks.OnQuotaHold): each is a wait for the
	// quota's window, not an outage's parked retry. ObserveQuotas gauges
	// the quotas themselves.
	QuotaHoldsName = "retryhttp.client.quota.holds"
)

// Attribute keys, besides OpenTelemetry's http.request.method,
// server.address, server.port, http.response.status_code and error.type.
const (
	// OutcomeKey is the attribute that says how a request ended: the
	// retryhttp.StopReason in snake case ("success", "retries_exhausted",
	// "budget_refused", …).
	OutcomeKey = attribute.Key("retryhttp.outcome")

	// RetryCauseKey is the attribute that says why a retry was sent:
	// retryhttp.Decision.Cause ("status", "timeout", "dns", "connection",
	// "error" or "hedge").
	RetryCauseKey = attribute.Key("retryhttp.retry.cause")

	// ParkEventKey is the attribute that says what happened to a parked
	// retry: retryhttp.ParkKind's String ("parked", "released", "dropped").
	ParkEventKey = attribute.Key("retryhttp.park.event")
)

// Bucket boundaries of the histograms.
var (
	delayBuckets    = []float64{0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	attemptsBuckets = []float64{1, 2, 3, 4, 5, 6, 8, 10, 16}
)

// instruments are the instruments of one New.
type instruments struct {
	attrs attrCache

	requests, attempts, retries, failures, refusals metric.Int64Counter
	parked, quotaHolds                              metric.Int64Counter
	circuit, window                                 metric.Int64Gauge
	delay, parkWait                                 metric.Float64Histogram
	perRequest                                      metric.Int64Histogram
}

// New returns an option that makes a Transport record its metrics with
// instruments made by mp's meter for ScopeName; nil means the global meter
// provider (otel.GetMeterProvider). It fails only if an instrument cannot be
// made. The option may be given to any number of Transports: they share the
// instruments.
//
// Recording runs synchronously in the transport's hooks, on the request's
// goroutine. Once a destination's attribute sets are cached (the first
// request to it makes them; up to 4096 are kept), a request answered at once
// allocates nothing more than without metrics.
// Recording costs time, nearly all in the SDK's aggregation:
// docs/observability.md gives measurements.
func New(mp metric.MeterProvider) (retryhttp.Option, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	ins := instruments{attrs: newAttrCache()}
	var err, e error
	ins.requests, e = m.Int64Counter(RequestsName, metric.WithUnit("{request}"),
		metric.WithDescription("Logical requests sent through the transport (one per RoundTrip), by outcome."))
	err = errors.Join(err, e)
	ins.attempts, e = m.Int64Counter(AttemptsName, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts sent to servers: first attempts, retries and hedges."))
	err = errors.Join(err, e)
	ins.retries, e = m.Int64Counter(RetriesName, metric.WithUnit("{retry}"),
		metric.WithDescription("Decisions to send another attempt of a request, by cause."))
	err = errors.Join(err, e)
	ins.failures, e = m.Int64Counter(FailuresName, metric.WithUnit("{request}"),
		metric.WithDescription("Logical requests that ended with an error or a 429 or 5xx response, by outcome."))
	err = errors.Join(err, e)
	ins.refusals, e = m.Int64Counter(BudgetRefusalsName, metric.WithUnit("{request}"),
		metric.WithDescription("Logical requests whose retry was refused by the retry budget."))
	err = errors.Join(err, e)
	ins.circuit, e = m.Int64Gauge(CircuitStateName, metric.WithUnit("{state}"),
		metric.WithDescription("State of the circuit breaker of a destination: 0 closed, 1 half-open, 2 open."))
	err = errors.Join(err, e)
	ins.delay, e = m.Float64Histogram(RetryDelayName, metric.WithUnit("s"),
		metric.WithDescription("Wait chosen before each retry."),
		metric.WithExplicitBucketBoundaries(delayBuckets...))
	err = errors.Join(err, e)
	ins.perRequest, e = m.Int64Histogram(AttemptsPerRequestName, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts sent per logical request."),
		metric.WithExplicitBucketBoundaries(attemptsBuckets...))
	err = errors.Join(err, e)
	ins.parked, e = m.Int64Counter(ParkedName, metric.WithUnit("{retry}"),
		metric.WithDescription("Waits in the retry budget (retries an outage parked, pause-lane waits, held first attempts): begun, released, or dropped."))
	err = errors.Join(err, e)
	ins.parkWait, e = m.Float64Histogram(ParkWaitName, metric.WithUnit("s"),
		metric.WithDescription("Time a wait in the retry budget (an outage's parked retry, a pause-lane wait, a held first attempt) lasted, until released or dropped."),
		metric.WithExplicitBucketBoundaries(delayBuckets...))
	err = errors.Join(err, e)
	ins.window, e = m.Int64Gauge(ParkWindowName, metric.WithUnit("{retry}"),
		metric.WithDescription("Parked retries a destination lets be in flight at once."))
	err = errors.Join(err, e)
	ins.quotaHolds, e = m.Int64Counter(QuotaHoldsName, metric.WithUnit("{hold}"),
		metric.WithDescription("Requests held because the quota their server advertised was spent, until its window turns."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	return func(t *retryhttp.Transport) {
		retryhttp.WithHooks(retryhttp.Hooks{
			OnAttempt:            ins.attempt,
			OnRetryDecision:      ins.decision,
			OnPark:               ins.park,
			OnQuotaHold:          ins.quotaHold,
			OnCircuitStateChange: ins.circuitChanged,
		})(t)
	}, nil
}

func (ins *instruments) park(e retryhttp.ParkEvent) {
	a := e.Attempt
	ctx := ctxOf(a.Req)
	d := ins.attrs.dest(a.Req)
	opts := d.get(&ins.attrs, subKey{kind: kindPark, code: int(e.Kind)})
	ins.parked.Add(ctx, 1, opts.add...)
	if e.Kind != retryhttp.ParkParked {
		ins.parkWait.Record(ctx, e.Waited.Seconds(), opts.rec...)
	}
	ins.window.Record(ctx, int64(e.Window), d.get(&ins.attrs, subKey{kind: kindHost}).rec...)
}

// quotaHold counts a hold of a request by its advertised quota, per
// destination.
func (ins *instruments) quotaHold(h retryhttp.QuotaHold) {
	req := h.Attempt.Req
	ins.quotaHolds.Add(ctxOf(req), 1, ins.attrs.dest(req).get(&ins.attrs, subKey{kind: kindHost}).add...)
}

func (ins *instruments) attempt(ai retryhttp.AttemptInfo) {
	a := &ai.Attempt
	d := ins.attrs.dest(a.Req)
	var opts *attrOpts
	if a.Res != nil {
		opts = d.status(&ins.attrs, a.Res.StatusCode)
	} else {
		k := subKey{kind: kindAttempt}
		if a.Err != nil {
			k.label = errorType(*a)
		}
		opts = d.get(&ins.attrs, k)
	}
	ins.attempts.Add(ctxOf(a.Req), 1, opts.add...)
}

func (ins *instruments) decision(dc retryhttp.Decision) {
	a := &dc.Attempt
	ctx := ctxOf(a.Req)
	d := ins.attrs.dest(a.Req)
	if dc.Retry {
		ins.retries.Add(ctx, 1, d.get(&ins.attrs, subKey{kind: kindRetry, label: dc.Cause()}).add...)
		ins.delay.Record(ctx, dc.Delay.Seconds(), d.request.rec...)
		return
	}
	if dc.Reason == retryhttp.StopBudgetRefused {
		ins.refusals.Add(ctx, 1, d.request.add...)
	}
	opts := d.stop(&ins.attrs, dc.Reason)
	ins.requests.Add(ctx, 1, opts.add...)
	ins.perRequest.Record(ctx, int64(a.Count), opts.rec...)
	if failed(a) {
		ins.failures.Add(ctx, 1, opts.add...)
	}
}

func (ins *instruments) circuitChanged(host string, _, to retryhttp.CircuitState) {
	u, err := url.Parse(host)
	if err != nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("server.address", u.Hostname())}
	if port, err := strconv.Atoi(u.Port()); err == nil {
		attrs = append(attrs, attribute.Int("server.port", port))
	}
	ins.circuit.Record(context.Background(), int64(to), metric.WithAttributes(attrs...))
}

// failed reports whether a request that ended with a's outcome failed: an
// error, or a response with status 429 or 5xx.
func failed(a *retryhttp.Attempt) bool {
	switch {
	case a.Err != nil:
		return true
	case a.Res == nil:
		return false
	}
	return a.Res.StatusCode >= 500 || a.Res.StatusCode == http.StatusTooManyRequests
}

// outcomes are the values of OutcomeKey, by StopReason.
var outcomes = map[retryhttp.StopReason]string{
	retryhttp.StopSuccess:           "success",
	retryhttp.StopNotRetryable:      "not_retryable",
	retryhttp.StopRetriesExhausted:  "retries_exhausted",
	retryhttp.StopBudgetRefused:     "budget_refused",
	retryhttp.StopCircuitOpen:       "circuit_open",
	retryhttp.StopDelayTooLong:      "delay_too_long",
	retryhttp.StopDeadline:          "deadline_too_close",
	retryhttp.StopCanceled:          "canceled",
	retryhttp.StopError:             "error",
	retryhttp.StopBodyNotReplayable: "body_not_replayable",
	retryhttp.StopQuotaWait:         "quota_wait",
}

func outcome(r retryhttp.StopReason) string {
	if s, ok := outcomes[r]; ok {
		return s
	}
	return "_OTHER"
}

// errorType classifies the error of an attempt in a word: "canceled", or
// the cause a retry of it would have ("timeout", "dns", "connection",
// "error").
func errorType(a retryhttp.Attempt) string {
	if errors.Is(a.Err, context.Canceled) {
		return "canceled"
	}
	return retryhttp.Decision{Retry: true, Attempt: a}.Cause()
}

// knownMethods are the methods reported as they are; others are "_OTHER",
// as OpenTelemetry's HTTP conventions say, to bound cardinality.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodConnect: true,
	http.MethodOptions: true, http.MethodTrace: true,
}

// requestKey returns the key of the attributes of kind for req: its
// method, host and port, never its path or query, which would make the
// cardinality unbounded. It does not allocate.
func requestKey(kind attrKind, req *http.Request) attrKey {
	k := attrKey{kind: kind}
	if req == nil {
		return k
	}
	switch m := req.Method; {
	case m == "":
		k.method = http.MethodGet
	case knownMethods[m]:
		k.method = m
	default:
		k.method = "_OTHER"
	}
	if u := req.URL; u != nil {
		k.host = u.Hostname()
		k.port = portOf(u)
	}
	return k
}

// portOf returns u's port, or its scheme's default, or 0.
func portOf(u *url.URL) int {
	if port := u.Port(); port != "" {
		if p, err := strconv.Atoi(port); err == nil {
			return p
		}
		return 0
	}
	switch u.Scheme {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}

func ctxOf(req *http.Request) context.Context {
	if req == nil {
		return context.Background()
	}
	return req.Context()
}

// attrKind says which attributes an attrKey stands for.
type attrKind uint8

const (
	kindRequest attrKind = iota // method, address, port
	kindAttempt                 // … and the status code or error.type
	kindRetry                   // … and the retry's cause
	kindStop                    // … and the outcome
	kindPark                    // … and the park event
	kindHost                    // address and port only
)

// attrKey identifies one set of attributes.
type attrKey struct {
	kind   attrKind
	method string
	host   string
	port   int
	code   int    // kindAttempt: the status code, or 0
	label  string // error.type, the retry's cause or the outcome
}

// attrSet returns the attributes k stands for.
func (k attrKey) attrSet() attribute.Set {
	if k.kind == kindHost {
		k.method = ""
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	if k.method != "" {
		attrs = append(attrs, attribute.String("http.request.method", k.method))
	}
	if k.host != "" {
		attrs = append(attrs, attribute.String("server.address", k.host))
	}
	if k.port > 0 {
		attrs = append(attrs, attribute.Int("server.port", k.port))
	}
	switch {
	case k.kind == kindAttempt && k.code != 0:
		attrs = append(attrs, attribute.Int("http.response.status_code", k.code))
	case k.kind == kindAttempt && k.label != "":
		attrs = append(attrs, attribute.String("error.type", k.label))
	case k.kind == kindRetry:
		attrs = append(attrs, RetryCauseKey.String(k.label))
	case k.kind == kindStop:
		attrs = append(attrs, OutcomeKey.String(k.label))
	case k.kind == kindPark:
		attrs = append(attrs, ParkEventKey.String(k.label))
	}
	return attribute.NewSet(attrs...)
}

// attrOpts are the measurement options that carry one attribute set.
type attrOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newAttrOpts(k attrKey) *attrOpts {
	opt := metric.WithAttributeSet(k.attrSet())
	return &attrOpts{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
}

// maxCachedAttrs bounds the attribute sets kept; past it, sets are built
// for each measurement.
const maxCachedAttrs = 4096

// destBuckets is the number of chains of an attrCache's table.
const destBuckets = 1024

// attrCache keeps the measurement options of the attribute sets seen, so
// that recording a measurement with attributes seen before allocates
// nothing and takes no lock. It is safe for concurrent use.
//
// Its entries are destinations as requests spell them (scheme, URL.Host
// and method, the strings compared as they are, so that finding one parses
// nothing), in a fixed table of chains that readers walk without a lock;
// each destination keeps its attribute sets by kind in a small map that is
// copied when a set is added. Writers take mu; entries are never removed.
type attrCache struct {
	seed    maphash.Seed
	buckets *[destBuckets]atomic.Pointer[dest] // chains, newest first
	mu      sync.Mutex                         // serialises writers
	n       atomic.Int64                       // attribute sets kept

	// last is the destination found last: a run of measurements of one
	// destination, the usual traffic of a client (and the attempt and the
	// stop of one request), skips the hash and the chain. It is written
	// only when it changes.
	last atomic.Pointer[dest]
}

func newAttrCache() attrCache {
	return attrCache{seed: maphash.MakeSeed(), buckets: new([destBuckets]atomic.Pointer[dest])}
}

// dest is the attribute sets of requests with one scheme, URL.Host and
// method.
type dest struct {
	host, scheme, method string // as in the request (copies, see canonical)
	next                 *dest  // in its chain; set before it is published

	base    attrKey   // method, address and port, as reported
	request *attrOpts // base's attributes: kindRequest

	// The sets of the outcomes of nearly every request, in arrays (nil
	// until first made), and the others in a map that is copied to add one.
	ok    [8]atomic.Pointer[attrOpts]              // kindAttempt, status 200-207
	stops [numStopReasons]atomic.Pointer[attrOpts] // kindStop, by StopReason
	subs  atomic.Pointer[map[subKey]*attrOpts]     // the others
}

// numStopReasons bounds the StopReasons kept in dest.stops; others are
// kept in its map.
const numStopReasons = 16

// subKey identifies one of a destination's attribute sets: its kind and
// the status code (kindAttempt), the StopReason (kindStop), the ParkKind
// (kindPark), or a label (error.type of kindAttempt, the retry's cause).
type subKey struct {
	kind  attrKind
	code  int
	label string
}

// dest returns the attribute sets of req's destination and method.
func (c *attrCache) dest(req *http.Request) *dest {
	if req == nil {
		return c.newDest(nil, "", "", "")
	}
	var scheme, host string
	if u := req.URL; u != nil {
		scheme, host = u.Scheme, u.Host
	}
	last := c.last.Load()
	if last != nil && last.is(host, scheme, req.Method) {
		return last
	}
	chain := &c.buckets[maphash.String(c.seed, host)%destBuckets]
	if d := chain.Load().find(host, scheme, req.Method); d != nil {
		c.last.Store(d)
		return d
	}
	if c.n.Load() >= maxCachedAttrs {
		return c.newDest(req, scheme, host, req.Method) // not kept
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	head := chain.Load()
	if d := head.find(host, scheme, req.Method); d != nil {
		return d
	}
	// The key's strings may point into a request's URL: keep copies.
	d := c.newDest(req, canonical(scheme), strings.Clone(host), canonical(req.Method))
	d.next = head
	chain.Store(d)
	c.n.Add(1)
	return d
}

// find returns the dest of the chain that starts at d with the given key,
// or nil.
func (d *dest) find(host, scheme, method string) *dest {
	for ; d != nil; d = d.next {
		if d.is(host, scheme, method) {
			return d
		}
	}
	return nil
}

// is reports whether d is the dest of the given key.
func (d *dest) is(host, scheme, method string) bool {
	return d.host == host && same(d.method, method) && same(d.scheme, scheme)
}

// same reports whether a == b, comparing with the usual schemes and
// methods inline rather than by a call.
func same(a, b string) bool {
	switch b {
	case "http":
		return a == "http"
	case "https":
		return a == "https"
	case http.MethodGet:
		return a == http.MethodGet
	case http.MethodPost:
		return a == http.MethodPost
	}
	return a == b
}

// canonical returns a copy of s, or, for the usual schemes and methods,
// the constant that spells it.
func canonical(s string) string {
	for _, c := range [...]string{"http", "https", http.MethodGet, http.MethodPost, http.MethodPut,
		http.MethodDelete, http.MethodHead, http.MethodPatch, http.MethodOptions} {
		if s == c {
			return c
		}
	}
	return strings.Clone(s)
}

func (c *attrCache) newDest(req *http.Request, scheme, host, method string) *dest {
	d := &dest{host: host, scheme: scheme, method: method, base: requestKey(kindRequest, req)}
	d.base.method, d.base.host = strings.Clone(d.base.method), strings.Clone(d.base.host)
	d.request = newAttrOpts(d.base)
	return d
}

// get returns the options of d's attribute set k, making them if they are
// missing.
func (d *dest) get(c *attrCache, k subKey) *attrOpts {
	slot := d.slot(k)
	if slot != nil {
		if o := slot.Load(); o != nil {
			return o
		}
	} else if m := d.subs.Load(); m != nil {
		if o, ok := (*m)[k]; ok {
			return o
		}
	}
	ak := d.base
	ak.kind, ak.code, ak.label = k.kind, 0, k.label
	switch k.kind {
	case kindAttempt:
		ak.code = k.code
	case kindStop:
		ak.label = outcome(retryhttp.StopReason(k.code))
	case kindPark:
		ak.label = retryhttp.ParkKind(k.code).String()
	}
	o := newAttrOpts(ak)
	if c.n.Load() >= maxCachedAttrs {
		return o // not kept
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slot != nil {
		if kept := slot.Load(); kept != nil {
			return kept
		}
		slot.Store(o)
		c.n.Add(1)
		return o
	}
	m := d.subs.Load()
	grown := make(map[subKey]*attrOpts, 1)
	if m != nil {
		if o, ok := (*m)[k]; ok {
			return o
		}
		grown = make(map[subKey]*attrOpts, len(*m)+1)
		for kk, v := range *m {
			grown[kk] = v
		}
	}
	k.label = strings.Clone(k.label)
	grown[k] = o
	d.subs.Store(&grown)
	c.n.Add(1)
	return o
}

// status returns d.get(c, subKey{kind: kindAttempt, code: code}): the
// options of an attempt answered with status code, read from d.ok first,
// without building a key.
func (d *dest) status(c *attrCache, code int) *attrOpts {
	if i := uint(code - 200); i < uint(len(d.ok)) {
		if o := d.ok[i].Load(); o != nil {
			return o
		}
	}
	return d.get(c, subKey{kind: kindAttempt, code: code})
}

// stop returns d.get(c, subKey{kind: kindStop, code: int(r)}): the options
// of a request that stopped for r, read from d.stops first, without
// building a key.
func (d *dest) stop(c *attrCache, r retryhttp.StopReason) *attrOpts {
	if i := uint(r); i < uint(len(d.stops)) {
		if o := d.stops[i].Load(); o != nil {
			return o
		}
	}
	return d.get(c, subKey{kind: kindStop, code: int(r)})
}

// slot returns the array element that keeps d's set k, or nil if k is
// kept in the map.
func (d *dest) slot(k subKey) *atomic.Pointer[attrOpts] {
	switch {
	case k.kind == kindAttempt && k.label == "" && uint(k.code-200) < uint(len(d.ok)):
		return &d.ok[k.code-200]
	case k.kind == kindStop && uint(k.code) < uint(len(d.stops)):
		return &d.stops[k.code]
	}
	return nil
}
