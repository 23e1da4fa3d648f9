// Package events carries a run's events over NATS JetStream.
//
// Every event of a run is an agentmesh.event.v1.RunEvent published on the subject
// agentmesh.run.<run_id>.<kind> and kept by the JetStream stream AGENTMESH_RUNS. Each publish is
// a producer span of the run's trace ("publish agentmesh.run.{run_id}.<kind>", with the
// OpenTelemetry messaging attributes); each message carries that span's W3C traceparent, so a
// subscriber's spans continue the run's trace, and a Nats-Msg-Id of "<run_id>-<seq>", so
// JetStream drops a republished event.
//
// A producer numbers a run's events with a RunStream (seq 1, 2, 3 …) made by a Publisher. Emit
// retries an event until JetStream has stored it and never reuses a seq; an event too large for
// one NATS message is stored cut down (a run_finished event with its result's summary and
// result_omitted set); the stream is created again when NATS has lost it. Publisher.Ready tells
// whether events can be stored right now. A consumer replays and tails a run with Watch, and a
// resumed run continues after LastSeq. Connect makes a connection that reconnects forever;
// StartEmbedded runs a NATS server with JetStream inside the process for development and tests.
package events
