// Package mesh wires the nine agentmesh services together in one process — each still on its
// own gRPC server and loopback port, talking to its peers over real gRPC — with an embedded
// NATS server (or an external one). `agentmesh dev` and the end-to-end tests run exactly this.
//
// It also holds the translation from the configuration file to each service's options
// (Contract, GenerationOptions, ...), which the per-service binaries share.
package mesh
