package metricstest

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// measuringProvider is a meter provider whose meters measure each synchronous instrument once,
// at zero and without attributes, as they make it.
type measuringProvider struct{ metric.MeterProvider }

// Meter returns the provider's meter of name, measuring its instruments as they are made.
func (p measuringProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return measuringMeter{p.MeterProvider.Meter(name, opts...)}
}

// measuringMeter is a meter that measures each synchronous instrument once, at zero and without
// attributes, as it makes it.
type measuringMeter struct{ metric.Meter }

// Int64Counter makes the counter and adds zero to it.
func (m measuringMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	i, err := m.Meter.Int64Counter(name, opts...)
	if err == nil {
		i.Add(context.Background(), 0)
	}
	return i, err
}

// Int64UpDownCounter makes the up-down counter and adds zero to it.
func (m measuringMeter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	i, err := m.Meter.Int64UpDownCounter(name, opts...)
	if err == nil {
		i.Add(context.Background(), 0)
	}
	return i, err
}

// Int64Histogram makes the histogram and records zero.
func (m measuringMeter) Int64Histogram(name string, opts ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	i, err := m.Meter.Int64Histogram(name, opts...)
	if err == nil {
		i.Record(context.Background(), 0)
	}
	return i, err
}

// Int64Gauge makes the gauge and records zero.
func (m measuringMeter) Int64Gauge(name string, opts ...metric.Int64GaugeOption) (metric.Int64Gauge, error) {
	i, err := m.Meter.Int64Gauge(name, opts...)
	if err == nil {
		i.Record(context.Background(), 0)
	}
	return i, err
}

// Float64Counter makes the counter and adds zero to it.
func (m measuringMeter) Float64Counter(name string, opts ...metric.Float64CounterOption) (metric.Float64Counter, error) {
	i, err := m.Meter.Float64Counter(name, opts...)
	if err == nil {
		i.Add(context.Background(), 0)
	}
	return i, err
}

// Float64UpDownCounter makes the up-down counter and adds zero to it.
func (m measuringMeter) Float64UpDownCounter(name string, opts ...metric.Float64UpDownCounterOption) (metric.Float64UpDownCounter, error) {
	i, err := m.Meter.Float64UpDownCounter(name, opts...)
	if err == nil {
		i.Add(context.Background(), 0)
	}
	return i, err
}

// Float64Histogram makes the histogram and records zero.
func (m measuringMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	i, err := m.Meter.Float64Histogram(name, opts...)
	if err == nil {
		i.Record(context.Background(), 0)
	}
	return i, err
}

// Float64Gauge makes the gauge and records zero.
func (m measuringMeter) Float64Gauge(name string, opts ...metric.Float64GaugeOption) (metric.Float64Gauge, error) {
	i, err := m.Meter.Float64Gauge(name, opts...)
	if err == nil {
		i.Record(context.Background(), 0)
	}
	return i, err
}
