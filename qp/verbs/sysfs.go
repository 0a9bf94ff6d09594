package verbs

import (
	"os"
	"strconv"
	"strings"

	"github.com/mptx-dev/mptx/units"
)

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readIntFile(path string, def int) int {
	v, err := strconv.Atoi(readFile(path))
	if err != nil {
		return def
	}
	return v
}

// parseRate parses sysfs's port rate ("10 Gb/sec (1X FDR10)", "100 Gb/sec
// (2X HDR)") into a BitRate; 0 if it cannot.
func parseRate(s string) units.BitRate {
	f := strings.Fields(s)
	if len(f) < 2 || !strings.HasPrefix(f[1], "Gb/s") {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 {
		return 0
	}
	return units.BitRate(v * 1e9)
}
