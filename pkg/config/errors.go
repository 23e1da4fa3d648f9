package config

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error of Load, LoadLayers and Validate: the configuration
// cannot be used (the CLI exits with code 4).
var ErrInvalid = errors.New("invalid configuration")

// LayerError is a problem in one configuration layer.
type LayerError struct {
	// Layer is the layer at fault.
	Layer Layer
	// Err says what is wrong.
	Err error
}

// Error names the layer and says what is wrong, e.g.
// `config layer "project" (./agentmesh.yaml): providers.local.api_key: variable OPENAI_API_KEY is not set`.
func (e *LayerError) Error() string {
	return fmt.Sprintf("config layer %q (%s): %v", e.Layer.Name, e.Layer.Path, e.Err)
}

// Unwrap returns ErrInvalid and the cause.
func (e *LayerError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// MissingVariableError is a ${VAR} that neither the layer's .env file nor the environment
// defines.
type MissingVariableError struct {
	// Key is the configuration key whose value uses the variable, e.g. providers.x.api_key.
	Key string
	// Variable is the variable's name.
	Variable string
}

// Error says which variable is missing where.
func (e *MissingVariableError) Error() string {
	return fmt.Sprintf("%s: variable %s is not set", e.Key, e.Variable)
}
