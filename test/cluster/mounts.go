package cluster

import (
	"bufio"
	"os"
	"sort"
	"strings"
	"syscall"
)

type mount struct {
	point  string
	fstype string
}

// readMounts parses /proc/self/mountinfo.
func readMounts() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mount{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return out, sc.Err()
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// unmountMatching lazily unmounts every mount point for which match is true,
// deepest first, until none is left (mounts can be stacked).
func unmountMatching(match func(string) bool) error {
	var lastErr error
	for i := 0; i < 20; i++ {
		mounts, err := readMounts()
		if err != nil {
			return err
		}
		var points []string
		for _, m := range mounts {
			if match(m.point) {
				points = append(points, m.point)
			}
		}
		if len(points) == 0 {
			return nil
		}
		sort.Slice(points, func(a, b int) bool { return len(points[a]) > len(points[b]) })
		for _, p := range points {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
				lastErr = err
			}
		}
	}
	return lastErr
}

func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
