// Package retryhttp provides an http.RoundTripper that retries failed
// requests, right by default, so that a program gets safe retries by setting
// one field:
//
//	client := &http.Client{Transport: retryhttp.New()}
//
// Why a RoundTripper: the code that makes requests does not change, and every
// request of the client, including those of libraries it is handed to, gets
// the same policy.
//
// What is retried by default (DefaultShouldRetryFn): failures that prove the
// request never left the client (DNS errors, refused connections) always;
// timeouts and connection resets only for requests guessed idempotent; 429,
// or an error response carrying Retry-After; 502 and 503 for requests guessed
// idempotent; nothing else. The wait (DefaultDelayFn) follows Retry-After
// with ±1/3 jitter, or else "full jitter" exponential backoff from 250ms,
// capped at 10s. Both are replaceable per transport (WithShouldRetryFn,
// WithDelayFn), per destination (WithDestinations: a policy per host,
// wildcard or matcher, from Go or a JSON file, reloadable while requests
// run) and per request through the context (SetShouldRetryFn, SetDelayFn).
// A context override beats the destination's policy, which beats the
// transport's option.
//
// What it never does: modify the caller's request, copy a body it can
// replay with GetBody, buffer an unbounded body, wait past the caller's
// deadline, retry after the caller cancelled, or return a response together
// with an error.
//
// What keeps retries from becoming a storm: a retry budget per destination
// host, on by default and shared by the process's Transports (RetryBudget),
// which limits the retries that fail, not those that succeed: a retry that
// succeeds gives its token back, so a host failing a share of its requests
// at random gets its retries as without a budget, while a host that sheds
// load gets a tenth of its requests in retries; in an outage, a retry
// without a token is parked until the host answers again, and released at
// the pace of the host's own traffic, so a short outage is ridden out while
// a dead backend sees about 1.0× its callers' requests instead of 4×. The
// price is waiting, in an outage only: a failed request waits, up to 2s or
// its deadline, before failing. A circuit breaker per host is available
// (WithCircuitBreaker), and so is hedging of idempotent requests
// (WithHedging), whose hedges spend the same budget.
// Across a chain of services, Pushback wraps a service's handler so that a
// failure it already retried reaches its callers marked "don't retry"
// (Retry-Pushback: no-retry), which the default policy honours: only the hop
// above a failure retries it. docs/storms.md gives the arithmetic and
// measurements. On a service's inbound side, LoadShedder limits the requests
// handled at once (fixed or adaptive) and refuses the excess with 503 and a
// jittered Retry-After, which the hop above may retry; put it outside
// Pushback (docs/shedding.md).
//
// Where it sits: the Transport wraps a base transport (WithTransport), which
// sends each attempt. Instrumentation that should see every attempt (an
// otelhttp transport, say) goes below it, as its base; instrumentation that
// should see one logical request goes above it. Inside the Transport, the
// policies wrap each other in this order, outermost first: the circuit
// breaker (one sample per logical request, after its retries), the
// idempotency key (one per logical request), the retry loop or the hedged
// path, the retry budget (asked before each retry or hedge), and the
// per-attempt timeout around each attempt.
//
// What it did can be seen through hooks on every attempt and decision
// (WithOnAttempt, WithOnRetryDecision, WithOnCircuitStateChange), log/slog
// records of retries and give-ups (WithLogger), and OpenTelemetry metrics
// from the nested module github.com/seed2409de8f/retryhttp/otelretryhttp;
// all are off by default and free then.
//
// The docs/ folder of the repository describes the defaults (docs/default.md),
// every option (docs/options.md) and observability (docs/observability.md).
package retryhttp
