package generation

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReadSSE(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want []sseEvent
		done bool
	}{
		{
			name: "named events, comments and multi-line data",
			body: ": keep-alive\n\nevent: ping\ndata: {}\n\nid: 7\ndata: line one\ndata: line two\nretry: 10\n\n",
			want: []sseEvent{{name: "ping", data: "{}"}, {data: "line one\nline two"}},
		},
		{
			name: "CRLF line ends and data without a space",
			body: "event: a\r\ndata:x\r\n\r\n",
			want: []sseEvent{{name: "a", data: "x"}},
		},
		{
			name: "an event cut off by the end of the body is still handled",
			body: "data: first\n\ndata: last",
			want: []sseEvent{{data: "first"}, {data: "last"}},
		},
		{
			name: "lines longer than the starting buffer, between short ones",
			body: "data: a\n\ndata: " + strings.Repeat("x", sseBufferBytes) + "\n\ndata: b\n\ndata: " + strings.Repeat("y", 40*sseBufferBytes) + "\n\ndata: c\n\n",
			want: []sseEvent{{data: "a"}, {data: strings.Repeat("x", sseBufferBytes)}, {data: "b"}, {data: strings.Repeat("y", 40*sseBufferBytes)}, {data: "c"}},
		},
		{
			name: "handle stops the stream",
			body: "data: a\n\ndata: stop\n\ndata: never\n\n",
			want: []sseEvent{{data: "a"}, {data: "stop"}},
			done: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []sseEvent
			done, err := readSSE(strings.NewReader(tc.body), func(ev sseEvent) (bool, error) {
				got = append(got, ev)
				return ev.data == "stop", nil
			})
			if err != nil || done != tc.done || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("events %+v done %v err %v, want %+v done %v", got, done, err, tc.want, tc.done)
			}
		})
	}

	boom := errors.New("boom")
	if _, err := readSSE(strings.NewReader("data: x\n\n"), func(sseEvent) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("handler error = %v, want it unchanged", err)
	}
	_, err := readSSE(strings.NewReader("data: "+strings.Repeat("x", maxEventBytes+1)), func(sseEvent) (bool, error) { return false, nil })
	var rerr *sseReadError
	if !errors.As(err, &rerr) {
		t.Errorf("oversized event error = %v, want an sseReadError", err)
	}
}
