package meshproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// JaegerEnv names the variable that gives the tests a Jaeger v2 binary: `make jaeger` builds
// bin/jaeger from tools/jaeger. A relative path is taken from the module's root.
const JaegerEnv = "AGENTMESH_JAEGER"

// errNotFound is the query API's 404.
var errNotFound = errors.New("not found")

// jaegerPoll is the pause between two reads of a trace that is not complete yet.
const jaegerPoll = 250 * time.Millisecond

// Jaeger is a Jaeger v2 process with in-memory storage (tools/jaeger/config.yaml), receiving
// OTLP over gRPC and answering its query API over HTTP, on free loopback ports.
type Jaeger struct {
	*Process
	otlp  string // host:port of the OTLP gRPC receiver
	query string // host:port of the query API
}

// StartJaeger starts the Jaeger binary JaegerEnv names, with the module's
// tools/jaeger/config.yaml, and waits until it takes spans and answers queries; it is killed
// when the test ends. Without JaegerEnv the test is skipped, unless the variable CI is set:
// CI must run the tests that need Jaeger, so there the test fails.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	path, root := jaegerBinary(t)
	j := &Jaeger{otlp: grpctest.FreeAddr(t), query: grpctest.FreeAddr(t)}
	env := append(os.Environ(),
		"JAEGER_OTLP_GRPC_ADDR="+j.otlp,
		"JAEGER_OTLP_HTTP_ADDR="+grpctest.FreeAddr(t),
		"JAEGER_QUERY_ADDR="+j.query,
		"JAEGER_QUERY_GRPC_ADDR="+grpctest.FreeAddr(t),
	)
	args := []string{"--config", filepath.Join(root, "tools", "jaeger", "config.yaml")}
	j.start(t, path, args, env)
	return j
}

// allInOneEndpoints are the keys of every address the Jaeger binary's embedded all-in-one
// configuration listens on (cmd/jaeger/internal/all-in-one.yaml), each at a fixed port.
var allInOneEndpoints = []string{
	"receivers.otlp.protocols.grpc",
	"receivers.otlp.protocols.http",
	"receivers.jaeger.protocols.grpc",
	"receivers.jaeger.protocols.thrift_http",
	"receivers.jaeger.protocols.thrift_binary",
	"receivers.jaeger.protocols.thrift_compact",
	"receivers.zipkin",
	"extensions.jaeger_query.http",
	"extensions.jaeger_query.grpc",
	"extensions.remote_sampling.http",
	"extensions.remote_sampling.grpc",
	"extensions.healthcheckv2.http",
	"extensions.healthcheckv2.grpc",
	"extensions.expvar",
	"extensions.zpages",
}

// StartJaegerAllInOne starts the Jaeger binary JaegerEnv names as the jaegertracing/jaeger
// image runs it, on its embedded all-in-one configuration (no --config) with args after, as
// a deployment gives them. Only the addresses differ: every endpoint is moved to a free
// loopback port, and its own metrics are off (their port is in a list --set cannot reach).
// It is skipped or fails without JaegerEnv as StartJaeger is.
func StartJaegerAllInOne(t testing.TB, args []string) *Jaeger {
	t.Helper()
	path, _ := jaegerBinary(t)
	j := &Jaeger{}
	all := []string{"--set=service.telemetry.metrics.level=none"}
	for _, key := range allInOneEndpoints {
		addr := grpctest.FreeAddr(t)
		switch key {
		case "receivers.otlp.protocols.grpc":
			j.otlp = addr
		case "extensions.jaeger_query.http":
			j.query = addr
		}
		all = append(all, "--set="+key+".endpoint="+addr)
	}
	j.start(t, path, append(all, args...), os.Environ())
	return j
}

// jaegerBinary returns the absolute path of the binary JaegerEnv names and the module's root;
// without JaegerEnv it skips t, or fails it under CI.
func jaegerBinary(t testing.TB) (path, root string) {
	t.Helper()
	path = os.Getenv(JaegerEnv)
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: CI must run this test (make jaeger builds bin/jaeger)", JaegerEnv)
		}
		t.Skipf("needs Jaeger: run `make jaeger` and set %s=bin/jaeger", JaegerEnv)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	return path, root
}

// start runs the binary at path with args and env, and waits until its OTLP receiver takes
// connections and its query API answers.
func (j *Jaeger) start(t testing.TB, path string, args, env []string) {
	t.Helper()
	j.Process = newProcess(t, "jaeger", path, t.TempDir(), args, env)
	j.Start(t)

	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	err := retry(ctx, j.Exited(t), func() error {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", j.otlp)
		if err != nil {
			return err
		}
		conn.Close()
		return j.get(ctx, "/api/services", nil)
	})
	if err != nil {
		t.Fatalf("jaeger is not ready: %v\n%s", err, j.Logs())
	}
}

// Env is the environment that makes a process export its spans to Jaeger: OTLP over gRPC,
// in batches sent every 100 ms.
func (j *Jaeger) Env() []string {
	return []string{
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + j.otlp,
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
}

// OTLPAddr is the host:port of Jaeger's OTLP gRPC receiver.
func (j *Jaeger) OTLPAddr() string { return j.otlp }

// Traces returns the traces of service the query API finds (/api/traces), at most limit (the
// in-memory store refuses a limit above the number of traces it keeps).
func (j *Jaeger) Traces(t testing.TB, service string, limit int) []*JaegerTrace {
	t.Helper()
	var answer struct {
		Data []*JaegerTrace `json:"data"`
	}
	q := url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}}
	if err := j.get(t.Context(), "/api/traces?"+q.Encode(), &answer); err != nil {
		t.Fatalf("traces of %s: %v", service, err)
	}
	return answer.Data
}

// HasTrace reports whether the query API finds the trace traceID (/api/traces/<id> answers
// 404 when it does not).
func (j *Jaeger) HasTrace(t testing.TB, traceID string) bool {
	t.Helper()
	err := j.get(t.Context(), "/api/traces/"+traceID, nil)
	if errors.Is(err, errNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("trace %s: %v", traceID, err)
	}
	return true
}

// WaitTrace reads the trace from the query API (/api/traces/<id>) until complete returns nil
// for it, and returns it. It fails t with complete's last error when timeout passes first.
func (j *Jaeger) WaitTrace(t testing.TB, traceID string, timeout time.Duration, complete func(*JaegerTrace) error) *JaegerTrace {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	tick := time.NewTicker(jaegerPoll)
	defer tick.Stop()
	for {
		var answer struct {
			Data []*JaegerTrace `json:"data"`
		}
		err := j.get(ctx, "/api/traces/"+traceID, &answer)
		if err == nil {
			if len(answer.Data) != 1 {
				err = fmt.Errorf("the query API answered %d traces, want 1", len(answer.Data))
			} else if err = complete(answer.Data[0]); err == nil {
				return answer.Data[0]
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("trace %s in Jaeger within %s: %v", traceID, timeout, err)
			return nil
		}
	}
}

// get fetches path from the query API and decodes its JSON answer into out (nil: ignore it).
func (j *Jaeger) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+j.query+path, nil)
	if err != nil {
		return err
	}
	req.Close = true // no idle connection outlives the test
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("GET %s: %w: %s", path, errNotFound, body)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// JaegerTrace is a trace as Jaeger's query API answers it.
type JaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []JaegerSpan             `json:"spans"`
	Processes map[string]JaegerProcess `json:"processes"`
}

// JaegerSpan is a span of a JaegerTrace. Jaeger shows the span's kind as the tag span.kind
// ("client", "server", "producer", ...).
type JaegerSpan struct {
	TraceID       string            `json:"traceID"`
	SpanID        string            `json:"spanID"`
	OperationName string            `json:"operationName"`
	References    []JaegerReference `json:"references"`
	Tags          JaegerTags        `json:"tags"`
	ProcessID     string            `json:"processID"`
}

// JaegerReference ties a span to another: CHILD_OF its parent, FOLLOWS_FROM a link.
type JaegerReference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// JaegerProcess is the resource of a span: its service.name, and the other resource attributes
// as tags (service.instance.id, ...).
type JaegerProcess struct {
	ServiceName string     `json:"serviceName"`
	Tags        JaegerTags `json:"tags"`
}

// JaegerTags are the attributes of a span or a process.
type JaegerTags []struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// Get returns the value of the tag key as text (a string unquoted, a number or a bool as JSON
// writes it), and whether the tag is there.
func (tags JaegerTags) Get(key string) (string, bool) {
	for _, tag := range tags {
		if tag.Key != key {
			continue
		}
		var s string
		if err := json.Unmarshal(tag.Value, &s); err == nil {
			return s, true
		}
		return string(tag.Value), true
	}
	return "", false
}

// Service returns the service.name of span's process.
func (tr *JaegerTrace) Service(span JaegerSpan) string {
	return tr.Processes[span.ProcessID].ServiceName
}

// Parent returns the span id of span's parent, "" for a root span.
func (span JaegerSpan) Parent() string {
	for _, ref := range span.References {
		if ref.RefType == "CHILD_OF" {
			return ref.SpanID
		}
	}
	return ""
}
