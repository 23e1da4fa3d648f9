package natstest_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/natstest"
)

// TestCutterPassesTheWholeMessageAndNoAnswer: the cutter passes on the whole armed message,
// though its payload arrives after its header, and the answer the server gives to it never
// reaches the client, however fast it comes.
func TestCutterPassesTheWholeMessageAndNoAnswer(t *testing.T) {
	for range 20 {
		upstream, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		received := make(chan string, 2)
		go func() {
			conn, err := upstream.Accept()
			if err != nil {
				received <- err.Error()
				return
			}
			defer conn.Close()
			r := bufio.NewReader(conn)
			header, _ := r.ReadString('\n')
			received <- header
			payload, _ := r.ReadString('\n')
			_, _ = io.WriteString(conn, "MSG _INBOX.a 1 2\r\nok\r\n")
			received <- payload
		}()
		c := natstest.NewCutter(t, upstream.Addr().String())
		c.Arm("$KV.b.")
		client, err := net.Dial("tcp", strings.TrimPrefix(c.URL(), "nats://"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(client, "HPUB $KV.b.k _INBOX.a 12 17\r\n"); err != nil {
			t.Fatal(err)
		}
		if got := <-received; got != "HPUB $KV.b.k _INBOX.a 12 17\r\n" {
			t.Fatalf("server got header %q", got)
		}
		if _, err := io.WriteString(client, "NATS/1.0\r\n\r\nhello\r\n"); err != nil {
			t.Fatal(err)
		}
		if got := <-received; got != "NATS/1.0\r\n" {
			t.Fatalf("server got %q after the header, want the message's headers", got)
		}
		<-c.Cut()
		answer, _ := io.ReadAll(client)
		if len(answer) != 0 {
			t.Fatalf("client got %q after the cut, want nothing", answer)
		}
		_ = client.Close()
		_ = upstream.Close()
	}
}
