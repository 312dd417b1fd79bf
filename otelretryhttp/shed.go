package otelretryhttp

import (
	"context"
	"errors"

	"github.com/seed2409de8f/retryhttp/inbound"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Names of the instruments of an inbound.LoadShedder (ObserveLoadShedder).
const (
	// ShedAdmittedName counts requests a shedder admitted, those it lets
	// pass by its MustPass predicate included.
	ShedAdmittedName = "retryhttp.server.shed.admitted"
	// ShedRefusedName counts requests a shedder refused with 503.
	ShedRefusedName = "retryhttp.server.shed.refused"
	// ShedLateName counts, of the refused, the requests a shedder refused
	// for their caller's deadline: too little time left on arrival, or
	// expired in the queue (inbound.ShedTooLate, inbound.ShedExpired).
	ShedLateName = "retryhttp.server.shed.late"
	// ShedLimitName gauges a shedder's concurrency limit.
	ShedLimitName = "retryhttp.server.shed.limit"
	// ShedInFlightName gauges the requests a shedder has admitted and that
	// have not ended, MustPass ones left out.
	ShedInFlightName = "retryhttp.server.shed.inflight"
	// ShedQueuedName gauges the requests waiting in a shedder's queue.
	ShedQueuedName = "retryhttp.server.shed.queued"
)

// ObserveLoadShedder makes mp's meter (nil: the global meter provider)
// report the counters and gauges of s, read from s.Stats when the metrics
// are collected: nothing is recorded per request, so it costs the requests
// nothing. attrs are added to every data point (a name for the shedder,
// when a process has several). Unregister the returned registration to
// stop. It fails if s is nil or an instrument cannot be made.
func ObserveLoadShedder(s *inbound.LoadShedder, mp metric.MeterProvider, attrs ...attribute.KeyValue) (metric.Registration, error) {
	if s == nil {
		return nil, errors.New("otelretryhttp: ObserveLoadShedder of a nil *inbound.LoadShedder")
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	var err, e error
	admitted, e := m.Int64ObservableCounter(ShedAdmittedName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests the load shedder admitted, MustPass ones included."))
	err = errors.Join(err, e)
	refused, e := m.Int64ObservableCounter(ShedRefusedName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests the load shedder refused with 503."))
	err = errors.Join(err, e)
	late, e := m.Int64ObservableCounter(ShedLateName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests the load shedder refused for their caller's deadline."))
	err = errors.Join(err, e)
	limit, e := m.Int64ObservableGauge(ShedLimitName, metric.WithUnit("{request}"),
		metric.WithDescription("Concurrency limit of the load shedder."))
	err = errors.Join(err, e)
	inflight, e := m.Int64ObservableGauge(ShedInFlightName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests admitted by the load shedder that have not ended."))
	err = errors.Join(err, e)
	queued, e := m.Int64ObservableGauge(ShedQueuedName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests waiting in the load shedder's queue."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		o.ObserveInt64(admitted, int64(st.Admitted), opt)
		o.ObserveInt64(refused, int64(st.Shed), opt)
		o.ObserveInt64(late, int64(st.Late), opt)
		o.ObserveInt64(limit, int64(st.Limit), opt)
		o.ObserveInt64(inflight, int64(st.InFlight), opt)
		o.ObserveInt64(queued, int64(st.Queued), opt)
		return nil
	}, admitted, refused, late, limit, inflight, queued)
}
