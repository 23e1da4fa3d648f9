module github.com/agentmesh/agentmesh

go 1.26.0

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/protobuf v1.36.13-0.20261016172727-e9ee2a76ab8e // indirect
)

require (
	github.com/agentmesh/agentmesh/gen v0.0.0-00010101000000-000000000000
	google.golang.org/grpc v1.85.0
)

replace github.com/agentmesh/agentmesh/gen => ./gen
