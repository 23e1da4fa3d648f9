// Package deploy holds the deployment files of the mesh (the Dockerfile, whose build context
// the .dockerignore at the repository's root trims, the Kubernetes kustomization in k8s/, and
// the docker-compose.yml at the repository's root) and the tests that check them against the
// binaries: every object decodes strictly into its Kubernetes type, every environment variable
// set on a service is one its binary reads, every address points at a Service and port that
// exist, the build context holds what the images build from, and replicas behind one dns:///
// name share the calls.
package deploy
