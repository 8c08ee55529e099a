// Package build holds the Dockerfiles of Elasti's images, for builders with a
// Docker engine or BuildKit. Its tests check that they produce what `make
// images` produces (test/cluster/images.go): the same binary path, entrypoint
// and user.
package build
