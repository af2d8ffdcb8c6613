// The peer's host for forsetti-bench --only peers: the smallest go-plugin (net/rpc) host that
// starts a plugin, dispenses it and calls it. One run is one round; it prints its timings as JSON.
//
//	host -plugin PATH -calls N   start to first call, N timed calls, the plugin's memory (JSON)
//	host -plugin PATH -once      start, one call, exit (the whole-process figure)
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net/rpc"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
)

// echoClient is what Dispense returns: a typed wrapper over the net/rpc client.
type echoClient struct{ c *rpc.Client }

func (e echoClient) Echo(v int) (int, error) {
	var reply int
	err := e.c.Call("Plugin.Echo", v, &reply)
	return reply, err
}

// echoPlugin is go-plugin's net/rpc glue; the plugin side is never used in this process.
type echoPlugin struct{}

func (echoPlugin) Server(*plugin.MuxBroker) (interface{}, error) { return nil, nil }
func (echoPlugin) Client(_ *plugin.MuxBroker, c *rpc.Client) (interface{}, error) {
	return echoClient{c}, nil
}

// kib reads one "Key:   N kB" line of a /proc file.
func kib(path, key string) float64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), key) {
			fields := strings.Fields(s.Text())
			if len(fields) >= 2 {
				v, _ := strconv.ParseFloat(fields[1], 64)
				return v
			}
		}
	}
	return -1
}

func main() {
	path := flag.String("plugin", "", "the plugin's executable")
	calls := flag.Int("calls", 2000, "timed calls after the first")
	once := flag.Bool("once", false, "start, one call, exit; print nothing")
	flag.Parse()

	t0 := time.Now()
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion: 1, MagicCookieKey: "FORSETTI_BENCH_PEER", MagicCookieValue: "echo",
		},
		Plugins: map[string]plugin.Plugin{"echo": echoPlugin{}},
		Cmd:     exec.Command(*path),
		// Quiet: the default logger traces every step to stderr at level Trace.
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Error}),
	})
	defer client.Kill()
	rpcClient, err := client.Client()
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		os.Exit(1)
	}
	raw, err := rpcClient.Dispense("echo")
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		os.Exit(1)
	}
	echo := raw.(echoClient)
	if _, err := echo.Echo(1); err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		os.Exit(1)
	}
	start := time.Since(t0)
	if *once {
		return
	}

	pid := client.ReattachConfig().Pid
	rss := kib(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	pss := kib(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:")

	// Untimed, as the Forsetti side's module makes 200 calls before it starts its clock.
	for i := 0; i < 200; i++ {
		if _, err := echo.Echo(i); err != nil {
			fmt.Fprintln(os.Stderr, "host:", err)
			os.Exit(1)
		}
	}
	t1 := time.Now()
	for i := 0; i < *calls; i++ {
		if _, err := echo.Echo(i); err != nil {
			fmt.Fprintln(os.Stderr, "host:", err)
			os.Exit(1)
		}
	}
	perCall := float64(time.Since(t1).Nanoseconds()) / float64(*calls)

	out, _ := json.Marshal(map[string]float64{
		"startNs": float64(start.Nanoseconds()), "callNs": perCall,
		"rssKiB": rss, "pssKiB": pss,
	})
	fmt.Println(string(out))
}
