// The peer's host for forsetti-bench --only peers: the smallest go-plugin (net/rpc) host that
// starts a plugin, dispenses it and calls it. One run is one round; it prints its timings as JSON.
//
//	host -plugin PATH -calls N   start to first call, N timed calls, the plugin's memory (JSON)
//	host -plugin PATH -once      start, one call, exit (the whole-process figure)
//	host -plugin PATH -many N    N plugins started at once, each called once; this process's
//	                             threads and RSS with all of them running; all killed (JSON)
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
	"sync"
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

// newClient is the one plugin client configuration every mode uses.
func newClient(path string) *plugin.Client {
	return plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion: 1, MagicCookieKey: "FORSETTI_BENCH_PEER", MagicCookieValue: "echo",
		},
		Plugins: map[string]plugin.Plugin{"echo": echoPlugin{}},
		Cmd:     exec.Command(path),
		// Quiet: the default logger traces every step to stderr at level Trace.
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Error}),
	})
}

// startOne starts a plugin and makes its first call, as the Forsetti side's start does.
func startOne(path string) (*plugin.Client, error) {
	client := newClient(path)
	rpcClient, err := client.Client()
	if err == nil {
		var raw interface{}
		if raw, err = rpcClient.Dispense("echo"); err == nil {
			_, err = raw.(echoClient).Echo(1)
		}
	}
	if err != nil {
		client.Kill()
		return nil, err
	}
	return client, nil
}

// runMany is the scale figure: n plugins started concurrently, then killed concurrently.
func runMany(path string, n int) int {
	clients := make([]*plugin.Client, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); clients[i], errs[i] = startOne(path) }(i)
	}
	wg.Wait()
	start := time.Since(t0)
	started := 0
	for _, e := range errs {
		if e == nil {
			started++
		}
	}
	threads := kib("/proc/self/status", "Threads:")
	rss := kib("/proc/self/status", "VmRSS:")
	t1 := time.Now()
	for _, c := range clients {
		if c != nil {
			wg.Add(1)
			go func(c *plugin.Client) { defer wg.Done(); c.Kill() }(c)
		}
	}
	wg.Wait()
	stop := time.Since(t1)
	out, _ := json.Marshal(map[string]float64{
		"startNs": float64(start.Nanoseconds()), "stopNs": float64(stop.Nanoseconds()),
		"threads": threads, "rssKiB": rss, "started": float64(started),
	})
	fmt.Println(string(out))
	if started != n {
		return 1
	}
	return 0
}

func main() {
	path := flag.String("plugin", "", "the plugin's executable")
	calls := flag.Int("calls", 2000, "timed calls after the first")
	once := flag.Bool("once", false, "start, one call, exit; print nothing")
	many := flag.Int("many", 0, "start this many plugins at once, report, kill them all")
	flag.Parse()
	if *many > 0 {
		os.Exit(runMany(*path, *many))
	}

	t0 := time.Now()
	client := newClient(*path)
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
