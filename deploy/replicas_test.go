package deploy

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"github.com/agentmesh/agentmesh/services/planning"
	"github.com/miekg/dns"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// replicaName is the name the test's DNS server answers with both replicas' addresses, as a
// headless Service's name answers with every ready pod's.
const replicaName = "planning.agentmesh.test."

// replicaHosts are the replicas' addresses: two loopback addresses, the same port on each.
var replicaHosts = []string{"127.0.0.1", "127.0.0.2"}

// TestReplicasBehindOneName (issue 14.3): two replicas of the planning stage behind one dns:///
// name both serve the orchestrator's calls. The orchestrator dials PLANNING_ADDR as it does in a
// cluster (orchestrator.DialPeers, pkg/dial: round-robin over every address the name resolves
// to), here through a DNS server of the test's own that answers the name with both replicas.
func TestReplicasBehindOneName(t *testing.T) {
	defer goleak.VerifyNone(t)

	port, stop := startReplicas(t)
	defer stop()
	resolver := startDNS(t, replicaName, replicaHosts)
	defer resolver.Shutdown()

	target := fmt.Sprintf("dns://%s/%s:%d", resolver.PacketConn.LocalAddr(), replicaName[:len(replicaName)-1], port)
	env := func(key, def string) string {
		if key == "PLANNING_ADDR" {
			return target
		}
		return def
	}
	peers, closePeers, err := orchestrator.DialPeers(orchestrator.PeerAddrsFromConfig(config.Default(), env))
	if err != nil {
		t.Fatal(err)
	}
	defer closePeers()

	answered := map[string]int{}
	deadline := time.Now().Add(20 * time.Second)
	for calls := 0; len(answered) < len(replicaHosts); calls++ {
		if time.Now().After(deadline) || calls == 1000 {
			t.Fatalf("after %d calls only %v answered, want both of %v", calls, answered, replicaHosts)
		}
		var p peer.Peer
		_, err := peers.Planning.Plan(t.Context(), &planningv1.PlanRequest{Goal: "What is 6 times 7?"}, grpc.Peer(&p))
		if err != nil {
			t.Fatalf("call %d: %v", calls, err)
		}
		host, _, _ := net.SplitHostPort(p.Addr.String())
		answered[host]++
	}
	t.Logf("calls answered per replica: %v", answered)
}

// startReplicas starts a planning server on the same free port of each of replicaHosts and
// returns the port and a function that stops them.
func startReplicas(t *testing.T) (int, func()) {
	t.Helper()
	for attempt := 0; attempt < 10; attempt++ {
		var servers []*server.Server
		stop := func() {
			for _, s := range servers {
				s.Shutdown(t.Context())
			}
		}
		port := "0"
		for _, host := range replicaHosts {
			s := server.New(server.Options{Name: "planning", Addr: net.JoinHostPort(host, port), Logger: slog.New(slog.DiscardHandler)})
			planning.New(planning.Options{}).Register(s.GRPC())
			if err := s.Start(); err != nil {
				break // the port is taken on this address: try another
			}
			servers = append(servers, s)
			_, port, _ = net.SplitHostPort(s.Addr())
		}
		if len(servers) == len(replicaHosts) {
			n, _ := strconv.Atoi(port)
			return n, stop
		}
		stop()
	}
	t.Fatal("found no port free on every replica address")
	return 0, nil
}

// startDNS serves a DNS server on a free loopback UDP port that answers the A query of name with
// hosts, and no record for any other question.
func startDNS(t *testing.T, name string, hosts []string) *dns.Server {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Authoritative = true
		for _, q := range req.Question {
			if q.Qtype != dns.TypeA || q.Name != name {
				continue
			}
			for _, h := range hosts {
				m.Answer = append(m.Answer, &dns.A{
					Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
					A:   net.ParseIP(h),
				})
			}
		}
		_ = w.WriteMsg(m)
	})
	started := make(chan struct{})
	s := &dns.Server{PacketConn: pc, Handler: mux, NotifyStartedFunc: func() { close(started) }}
	go func() {
		if err := s.ActivateAndServe(); err != nil {
			t.Errorf("DNS server: %v", err)
		}
	}()
	<-started
	return s
}
