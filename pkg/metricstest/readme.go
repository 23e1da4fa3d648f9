package metricstest

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"go.opentelemetry.io/otel/metric"
)

// Exposed serves, as telemetry.ServeMetrics does, the instruments register makes through the
// meter provider it is given, and returns the families a scrape reads. Each synchronous
// instrument is measured once as it is made, at zero and without attributes, so that it has a
// series whether or not register uses it.
func Exposed(t testing.TB, register func(metric.MeterProvider)) Families {
	t.Helper()
	m, err := telemetry.ServeMetrics("metricstest", telemetry.MetricsListener{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Shutdown(t.Context()); err != nil {
			t.Error(err)
		}
	}()
	register(measuringProvider{m.Provider()})
	return Scrape(t, m.Addr())
}

// readmeTable returns the metrics of the table of the "Metrics" section of the README at path,
// by Prometheus name (a row's first code span), each with the row's last cell: what serves it.
func readmeTable(t testing.TB, path string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	for line := range strings.Lines(metricsSection(t, path)) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		row := strings.TrimSuffix(strings.TrimSpace(line), " |")
		name, _, _ := strings.Cut(strings.TrimPrefix(row, "| `"), "`")
		rows[name] = row[strings.LastIndex(row, " | ")+len(" | "):]
	}
	if len(rows) == 0 {
		t.Fatalf("%s: the Metrics section has no table of metrics", path)
	}
	return rows
}

// CheckREADME checks the families f against the "Metrics" section of the README at path, both
// ways. Each family must be a row of its table when the table has rows of its prefix (what its
// name has before the first "_": rpc, gen, agentmesh), and be named in the section otherwise, by
// name (`target_info`) or by prefix (`go_*`); each row whose last cell (what serves it) starts
// with one of servedBy must be a family of f.
func CheckREADME(t testing.TB, path string, f Families, servedBy ...string) {
	t.Helper()
	rows := readmeTable(t, path)
	itemised := map[string]bool{}
	for name := range rows {
		itemised[prefix(name)] = true
	}
	section := metricsSection(t, path)
	for _, name := range slices.Sorted(maps.Keys(f)) {
		_, row := rows[name]
		switch {
		case row:
		case itemised[prefix(name)]:
			t.Errorf("%s: the Metrics section's table has no row for %s, a metric that is served", path, name)
		case !strings.Contains(section, "`"+name+"`") && !strings.Contains(section, "`"+prefix(name)+"_*`"):
			t.Errorf("%s: the Metrics section does not name %s, a metric that is served", path, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rows)) {
		if _, ok := f[name]; ok {
			continue
		}
		for _, by := range servedBy {
			if strings.HasPrefix(rows[name], by) {
				t.Errorf("%s: the Metrics section's table has a row for %s, served by %q, which is not served", path, name, by)
			}
		}
	}
}

// prefix returns what a metric's name has before its first "_".
func prefix(name string) string {
	p, _, _ := strings.Cut(name, "_")
	return p
}

// metricsSection returns the "Metrics" section of the README at path, up to the next heading of
// its level.
func metricsSection(t testing.TB, path string) string {
	t.Helper()
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### Metrics\n")
	if !ok {
		t.Fatalf("%s has no Metrics section (### Metrics)", path)
	}
	section, _, _ = strings.Cut(section, "\n### ")
	return section
}
