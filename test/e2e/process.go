package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// ContainerPID finds the main process of a pod's first container on this
// machine (the local cluster's containers are its processes): the lowest
// PID whose cgroup path names the container's ID.
func ContainerPID(pod *corev1.Pod) (int, error) {
	if len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].ContainerID == "" {
		return 0, fmt.Errorf("pod %s has no running container", pod.Name)
	}
	id := pod.Status.ContainerStatuses[0].ContainerID
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	best := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(cg), id) {
			continue
		}
		if best == 0 || pid < best {
			best = pid
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("no process of container %s (pod %s)", id[:min(12, len(id))], pod.Name)
	}
	return best, nil
}

// KillContainer SIGKILLs the main process of a pod's first container, as
// the kernel's OOM killer or a crash would end it: no SIGTERM, no drain.
func KillContainer(pod *corev1.Pod) error {
	pid, err := ContainerPID(pod)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %d (pod %s): %w", pid, pod.Name, err)
	}
	return nil
}
