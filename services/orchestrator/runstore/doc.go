// Package runstore keeps what makes an orchestrator run durable, in JetStream: the run's
// checkpoint (key-value, written with compare-and-set), the index of runs not yet finished,
// which names each run's owner, the replicas' heartbeats, idempotency keys, and the inputs other
// replicas hand to a run's owner (approval decisions, cancellation). Every bucket is created on
// demand and created again when NATS lost it (a restart with an empty store).
package runstore
