package mcp

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestFrameReaderDropsAServersRequestOverTheLimit: a request of the server's over the limit
// (a ping with huge params) is dropped, not answered in a call's place: its id is of the
// server's numbering, and read as an answer it failed whichever call of the client's had the
// same id. An answer over the limit is replaced by the error answer to its call, and the
// messages around them pass whole.
func TestFrameReaderDropsAServersRequestOverTheLimit(t *testing.T) {
	huge := strings.Repeat("x", 200)
	stream := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + huge + `"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"pad":"` + huge + `"}}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	quiet := slog.New(slog.DiscardHandler)
	got, err := io.ReadAll(newFrameReader(strings.NewReader(stream), 100, quiet))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"jsonrpc":"2.0","id":2,"error":`) ||
		lines[1] != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("read %q, want the error answer to call 2 and the answer to call 1 whole", lines)
	}
}

// TestFrameReaderSkipsLinesThatAreNoMessages: text and JSON that is no JSON-RPC message, which
// servers print on their stdout besides their messages, are skipped, and the messages around
// them pass whole; a line the stream ends in the middle of is no message either.
func TestFrameReaderSkipsLinesThatAreNoMessages(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	batch := `[{"jsonrpc":"2.0","method":"ping"}]` + "\n"
	stream := "server v1 listening on stdio\n" + answer + "\n" + `{"level":30,"msg":"answered"}` +
		"\n" + batch + `{"jsonrpc":"2.0","id":2,"res`
	quiet := slog.New(slog.DiscardHandler)
	got, err := io.ReadAll(newFrameReader(strings.NewReader(stream), 100, quiet))
	if err != nil {
		t.Fatal(err)
	}
	if want := answer + batch; string(got) != want {
		t.Errorf("read %q, want %q", got, want)
	}
}
