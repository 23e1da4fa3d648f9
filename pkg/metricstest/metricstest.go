// Package metricstest reads the metrics a service serves (telemetry.ServeMetrics) the way
// Prometheus does: it scrapes the text exposition over HTTP and parses it with the Prometheus
// parser, for tests to look series up by name and labels, and checks that the README's table
// of metrics names each metric a package serves (CheckREADME).
package metricstest

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Labels selects series: each named label must have the given value.
type Labels map[string]string

// Families are scraped metric families by name (e.g. "rpc_server_call_duration_seconds").
type Families map[string]*dto.MetricFamily

// Scrape reads the metrics served at addr (host:port) on telemetry.MetricsPath; a failed
// scrape fails the test.
func Scrape(t testing.TB, addr string) Families {
	t.Helper()
	ctx := context.Background()
	if tt, ok := t.(interface{ Context() context.Context }); ok {
		ctx = tt.Context()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+telemetry.MetricsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s", addr, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the metrics of %s: %v", addr, err)
	}
	return families
}

// Series returns the series of the family name that have labels.
func (f Families) Series(name string, labels Labels) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range f[name].GetMetric() {
		if matches(m, labels) {
			out = append(out, m)
		}
	}
	return out
}

// Value adds up the values of the series of name that have labels: a counter's, a gauge's,
// or a histogram's sum of observations.
func (f Families) Value(name string, labels Labels) float64 {
	var v float64
	for _, m := range f.Series(name, labels) {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue() + m.GetHistogram().GetSampleSum()
	}
	return v
}

// Count adds up the observations of the histogram series of name that have labels.
func (f Families) Count(name string, labels Labels) uint64 {
	var n uint64
	for _, m := range f.Series(name, labels) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// LabelValues returns the values the label takes in the series of name that have labels,
// sorted and without repeats.
func (f Families) LabelValues(name, label string, labels Labels) []string {
	seen := map[string]bool{}
	for _, m := range f.Series(name, labels) {
		for _, p := range m.GetLabel() {
			if p.GetName() == label {
				seen[p.GetValue()] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// String lists the families' names, to show what a scrape had when a lookup fails.
func (f Families) String() string {
	return fmt.Sprint(slices.Sorted(maps.Keys(f)))
}

func matches(m *dto.Metric, labels Labels) bool {
	have := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		have[p.GetName()] = p.GetValue()
	}
	for k, v := range labels {
		if have[k] != v {
			return false
		}
	}
	return true
}
