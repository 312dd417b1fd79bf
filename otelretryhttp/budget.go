package otelretryhttp

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"

	"github.com/seed2409de8f/retryhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Names of the gauges of a retryhttp.RetryBudget (ObserveRetryBudget).
const (
	// BudgetTokensName gauges the tokens left in a destination's bucket:
	// the retries it can still send at once. At zero, retries are parked
	// or refused.
	BudgetTokensName = "retryhttp.client.budget.tokens"
	// BudgetCapacityName gauges the size of a destination's bucket.
	BudgetCapacityName = "retryhttp.client.budget.capacity"
	// BudgetParkedName gauges the retries parked on a destination by an
	// outage, waiting for a slot of its window; waits in its pause lane are
	// not counted.
	BudgetParkedName = "retryhttp.client.budget.parked"
	// BudgetInFlightName gauges the slots of a destination's window held:
	// released parked retries (and hedges) in flight.
	BudgetInFlightName = "retryhttp.client.budget.inflight"
)

// ObserveRetryBudget makes mp's meter (nil: the global meter provider)
// report the state of each destination host of b, read from b.Hosts when
// the metrics are collected: nothing is recorded per request, so it costs
// the requests nothing, and collection never blocks them. Pass
// the *retryhttp.RetryBudget given to WithRetryBudget, or
// retryhttp.DefaultRetryBudget() for the budget of Transports made without
// that option.
//
// Each data point has server.address and server.port (and url.scheme) of
// its destination, so the number of series is bounded by the budget's
// MaxHosts; attrs are added to every one (a name for the budget, when a
// process has several). The window of parked retries is reported per
// event by the instruments of New (retryhttp.client.park.window).
// Unregister the returned registration to stop. It fails if b is nil or an
// instrument cannot be made.
func ObserveRetryBudget(b *retryhttp.RetryBudget, mp metric.MeterProvider, attrs ...attribute.KeyValue) (metric.Registration, error) {
	if b == nil {
		return nil, errors.New("otelretryhttp: ObserveRetryBudget of a nil *retryhttp.RetryBudget")
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	var err, e error
	tokens, e := m.Float64ObservableGauge(BudgetTokensName, metric.WithUnit("{retry}"),
		metric.WithDescription("Tokens left in the retry budget of a destination: retries it can send at once."))
	err = errors.Join(err, e)
	capacity, e := m.Int64ObservableGauge(BudgetCapacityName, metric.WithUnit("{retry}"),
		metric.WithDescription("Size of the retry budget's bucket of a destination."))
	err = errors.Join(err, e)
	parked, e := m.Int64ObservableGauge(BudgetParkedName, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries parked on a destination, waiting for a slot of its window."))
	err = errors.Join(err, e)
	inflight, e := m.Int64ObservableGauge(BudgetInFlightName, metric.WithUnit("{retry}"),
		metric.WithDescription("Slots of a destination's window held by released retries and hedges."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for h := range b.Hosts() {
			opt := metric.WithAttributeSet(destinationAttrs(h.Destination, attrs))
			o.ObserveFloat64(tokens, h.Tokens, opt)
			o.ObserveInt64(capacity, int64(h.Capacity), opt)
			o.ObserveInt64(parked, int64(h.Parked), opt)
			o.ObserveInt64(inflight, int64(h.InFlight), opt)
		}
		return nil
	}, tokens, capacity, parked, inflight)
}

// destinationAttrs returns the attributes of a destination given as
// scheme://host:port, with extra.
func destinationAttrs(dest string, extra []attribute.KeyValue) attribute.Set {
	kv := make([]attribute.KeyValue, 0, 3+len(extra))
	scheme, hostport, _ := strings.Cut(dest, "://")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	kv = append(kv, attribute.String("url.scheme", scheme), attribute.String("server.address", host))
	if p, err := strconv.Atoi(port); err == nil {
		kv = append(kv, attribute.Int("server.port", p))
	}
	return attribute.NewSet(append(kv, extra...)...)
}
