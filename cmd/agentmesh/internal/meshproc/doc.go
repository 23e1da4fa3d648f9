// Package meshproc runs agentmesh as separate processes on loopback, for tests that kill and
// restart them with real signals: a nats-server with JetStream, the eight stage services and any
// number of orchestrator replicas, each its own binary built from this module.
//
// Build compiles the binaries once per test binary; Start writes the configuration file the
// processes share (a scripted LLM provider, REST tools, approval and durability settings),
// starts NATS, the stages and the replicas, and waits until each one is healthy. A test then
// kills a replica (Process.Kill, SIGKILL) or stops it (Process.Stop, SIGTERM), restarts it on
// the same address, restarts NATS on the same port with the same or an empty store, and reads
// what the runs left in JetStream. Every process's output is kept and printed when the test
// fails.
//
//	func TestMain(m *testing.M) { meshproc.Main(m) }
//
//	func TestFailover(t *testing.T) {
//		llm := llmtest.New(t, scenarios...)
//		tools := meshproc.NewToolServer(t)
//		m := meshproc.Start(t, meshproc.Options{Config: meshproc.Config{
//			LLM:       llm.URL(),
//			RestTools: map[string]config.RestTool{"bump": tools.Tool("Bumps a counter.")},
//		}})
//		a, b := m.Replica("a"), m.Replica("b")
//		// start a run on a, a.Kill(t), follow it on b ...
//	}
package meshproc
