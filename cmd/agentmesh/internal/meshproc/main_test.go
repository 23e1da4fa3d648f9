package meshproc_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
)

func TestMain(m *testing.M) { meshproc.Main(m) }
