// Package config loads agentmesh.yaml: typed, layered configuration with ${VAR} expansion.
//
// Layers, highest priority first: the --config path, ./agentmesh.yaml,
// $HOME/.config/agentmesh/agentmesh.yaml and /etc/agentmesh/agentmesh.yaml. Loading starts from
// Default() and applies the layers from lowest to highest: mappings merge key by key at every
// depth (a provider defined in one layer and tuned in another ends up with both), lists and
// scalars replace, and an empty (null) value leaves the lower layers' value alone.
//
// Every string value of a layer may use ${VAR}, resolved from the .env file next to that
// layer's file first and the process environment second; an unresolved variable is an error
// naming the variable and the layer. ${parameters.x} placeholders (REST tool templates: an
// error anywhere else, since nothing else fills them in) and every value under
// mcp_servers.*.env and mcp_servers.*.headers are kept verbatim; $${X} is a literal ${X}.
//
// Every error of Load, LoadLayers and Validate wraps ErrInvalid.
package config
