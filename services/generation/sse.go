package generation

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// maxEventBytes bounds one server-sent event: its longest line, and all of its data lines.
const maxEventBytes = 16 << 20

// sseBufferBytes is the buffer a stream is read with at first. It grows to the longest line
// of the stream, but most are short (a chunk of an answer: some hundreds of bytes), and a run
// whose answer is streaming holds it for as long as the model writes (issue 15).
const sseBufferBytes = 512

// sseEvent is one server-sent event: its "event:" name (often empty) and its "data:" lines
// joined by newlines.
type sseEvent struct {
	name string
	data string
}

// sseReadError is a failure to read the event stream itself (not one of its events).
type sseReadError struct{ err error }

// Error returns the read failure's message.
func (e *sseReadError) Error() string { return e.err.Error() }

// Unwrap returns the read failure.
func (e *sseReadError) Unwrap() error { return e.err }

// readSSE calls handle for each event of body, in order, until handle reports done, and
// returns whether it did. Comments and fields other than event and data are skipped; an event
// cut off by the end of the body is still handled. Errors of handle are returned unchanged;
// failures to read the body are *sseReadError, bufio.ErrTooLong for a line or an event over
// maxEventBytes.
func readSSE(body io.Reader, handle func(sseEvent) (done bool, err error)) (bool, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, sseBufferBytes), maxEventBytes)
	var ev sseEvent
	var data []string
	size := 0 // of data joined
	dispatch := func() (bool, error) {
		if len(data) == 0 {
			ev = sseEvent{}
			return false, nil
		}
		ev.data = strings.Join(data, "\n")
		data, size = data[:0], 0
		out := ev
		ev = sseEvent{}
		return handle(out)
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if done, err := dispatch(); done || err != nil {
				return done, err
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.name = value
		case "data":
			if size += len(value) + 1; size > maxEventBytes {
				return false, &sseReadError{err: bufio.ErrTooLong}
			}
			data = append(data, value)
		}
	}
	if err := sc.Err(); err != nil {
		return false, &sseReadError{err: err}
	}
	return dispatch()
}

// streamReadError classifies a failure to read a stream: an oversized event, or a body that
// is not the gzip it says (decodeFailure), is BAD_RESPONSE, anything else a transport failure
// (transportError), whose NETWORK failure says that the connection was lost while the answer
// streamed: the provider was reached and answering.
func (e *endpoint) streamReadError(ctx context.Context, err error) error {
	var rerr *sseReadError
	switch {
	case !errors.As(err, &rerr):
		return err
	case errors.Is(err, bufio.ErrTooLong):
		return e.badResponse("a stream event is larger than %d bytes", maxEventBytes)
	}
	if derr := e.decodeFailure(rerr.err); derr != nil {
		return derr
	}
	terr := e.transportError(ctx, rerr.err)
	if se := stageerr.As(terr); se != nil && se.Class == typev1.ErrorClass_ERROR_CLASS_NETWORK {
		return stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_NETWORK, 0,
			"%s: the connection to %s was lost while the answer streamed: %s", e.name, e.shownURL,
			e.redact(rerr.err.Error()))
	}
	return terr
}

// streamedJSON reads a non-streamed answer to a streamed request and forwards its text as
// one delta, then each tool call as one fragment.
func (e *endpoint) streamedJSON(ctx context.Context, resp *http.Response, parse func([]byte) (*Response, error), onDelta func(*generationv1.Delta) error) (*Response, error) {
	body, err := e.readAll(ctx, resp)
	if err != nil {
		return nil, err
	}
	out, err := parse(body)
	if err != nil {
		return out, err // the part of a failed answer, if any (Provider.Stream)
	}
	if out.Content != "" || out.Reasoning != "" {
		if err := onDelta(&generationv1.Delta{Content: out.Content, Reasoning: out.Reasoning}); err != nil {
			return nil, err
		}
	}
	if err := forwardCalls(out.ToolCalls, onDelta); err != nil {
		return nil, err
	}
	return out, nil
}

// notAStream is the BAD_RESPONSE failure of a streamed request answered with a page of
// mediaType (text/html: a proxy's sign-in or error page served with status 200), quoting
// its start; read as events, such a page ended the stream without any.
func (e *endpoint) notAStream(resp *http.Response, mediaType string) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	return e.badResponse("the answer is %s, not an event stream: %s", mediaType, snippet(body))
}

// answerTooLarge is the BAD_RESPONSE failure of a streamed answer that outgrew
// maxResponseBytes, the bound of a non-streamed one: a stream without end (a runaway model, a
// broken proxy) held an answer that grew until the provider timeout ended it, and one over
// the gRPC message limit could not be sent on anyway.
func (e *endpoint) answerTooLarge() error {
	return e.badResponse("the streamed answer is larger than %d bytes", maxResponseBytes)
}

// forwardCalls forwards each of an answer's complete tool calls as one fragment.
func forwardCalls(calls []ToolCall, onDelta func(*generationv1.Delta) error) error {
	for i, c := range calls {
		d := &generationv1.ToolCallDelta{Index: int32(i), Id: c.ID, Name: c.Name, Arguments: c.Arguments}
		if err := onDelta(&generationv1.Delta{ToolCall: d}); err != nil {
			return err
		}
	}
	return nil
}
