package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"time"
)

// proxy is one reverse proxy in front of the two backends: its
// configuration, how to start it, reload it and what version it is.
type proxy struct {
	name    string
	dir     string // its temp dir: config, pid file, logs
	port    int    // where clients connect
	admin   int    // caddy's admin port
	backs   [2]int // backend ports
	procs   *procs
	current *proc // the process serving now (haproxy: the newest)
	log     *os.File
}

// proxyNames are the proxies the harness knows, in the order it runs them.
var proxyNames = []string{"haproxy", "nginx", "caddy"}

// configure writes the proxy's configuration: a typical production setup,
// on loopback ports, run as the current user.
func (px *proxy) configure() (string, error) {
	var cfg, file string
	a, b := px.backs[0], px.backs[1]
	switch px.name {
	case "haproxy":
		// retries and redispatch: a failed connection to a backend is
		// retried, the last time on another backend. Active health checks
		// take a dead backend out of rotation. hard-stop-after bounds how
		// long a process replaced by -sf finishes its requests.
		file = "haproxy.cfg"
		cfg = fmt.Sprintf(`global
	maxconn 2000
	hard-stop-after 5s
	pidfile %[1]s/haproxy.pid

defaults
	mode http
	option http-keep-alive
	timeout connect 1s
	timeout client 30s
	timeout server 30s
	timeout http-keep-alive 10s
	retries 3
	option redispatch

frontend fe
	bind 127.0.0.1:%[2]d
	default_backend be

backend be
	balance roundrobin
	option httpchk GET /health
	default-server check inter 1s fall 2 rise 2
	server a 127.0.0.1:%[3]d
	server b 127.0.0.1:%[4]d
`, px.dir, px.port, a, b)
	case "nginx":
		// An upstream with keep-alive connections and proxy_next_upstream
		// left at its default (error timeout; non-idempotent requests are
		// not passed to the next server once sent). Passive health:
		// max_fails=1 fail_timeout=10s, the defaults.
		file = "nginx.conf"
		userLine := ""
		if os.Geteuid() == 0 {
			// As root, nginx would run its workers as nobody, who cannot
			// read this temp dir.
			userLine = "user root root;"
		}
		cfg = fmt.Sprintf(`%[5]s
daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 2048; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	upstream be {
		server 127.0.0.1:%[3]d;
		server 127.0.0.1:%[4]d;
		keepalive 32;
	}
	server {
		listen 127.0.0.1:%[2]d;
		location / {
			proxy_pass http://be;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
		}
	}
}
`, px.dir, px.port, a, b, userLine)
	case "caddy":
		// reverse_proxy with lb_try_duration: a request that cannot reach
		// a backend is tried on another for up to 2 s (caddy retries only
		// dial errors for methods other than GET), and active health checks.
		file = "Caddyfile"
		cfg = fmt.Sprintf(`{
	admin 127.0.0.1:%[4]d
	auto_https off
	storage file_system %[5]s/caddy-data
}

http://127.0.0.1:%[1]d {
	reverse_proxy 127.0.0.1:%[2]d 127.0.0.1:%[3]d {
		lb_policy round_robin
		lb_try_duration 2s
		lb_try_interval 250ms
		health_uri /health
		health_interval 1s
		health_timeout 1s
	}
}
`, px.port, a, b, px.admin, px.dir)
	default:
		return "", fmt.Errorf("unknown proxy %q", px.name)
	}
	path := filepath.Join(px.dir, file)
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// command is the command line that starts the proxy in the foreground;
// replacing, for haproxy, is the pid of the process a reload replaces.
func (px *proxy) command(cfg string, replacing int) *exec.Cmd {
	switch px.name {
	case "haproxy":
		args := []string{"-db", "-f", cfg}
		if replacing > 0 {
			args = append(args, "-sf", fmt.Sprint(replacing))
		}
		return exec.Command("haproxy", args...)
	case "nginx":
		return exec.Command("nginx", "-p", px.dir, "-c", cfg)
	default:
		cmd := exec.Command("caddy", "run", "--config", cfg, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+px.dir, "XDG_DATA_HOME="+px.dir, "XDG_CONFIG_HOME="+px.dir)
		return cmd
	}
}

// start configures and starts the proxy.
func (px *proxy) start() error {
	for _, d := range []string{"body", "proxy", "fastcgi", "uwsgi", "scgi", "caddy-data"} {
		if err := os.MkdirAll(filepath.Join(px.dir, d), 0o700); err != nil {
			return err
		}
	}
	cfg, err := px.configure()
	if err != nil {
		return err
	}
	cmd := px.command(cfg, 0)
	cmd.Stdout, cmd.Stderr = px.log, px.log
	pr, err := px.procs.start(px.name, cmd, nil)
	if err != nil {
		return err
	}
	px.current = pr
	return nil
}

// reload reloads the proxy as an operator would: haproxy -sf (a new process
// takes the port, the old one finishes its requests), nginx -s reload,
// caddy reload --force (the configuration is unchanged).
func (px *proxy) reload() error {
	cfg := filepath.Join(px.dir, map[string]string{"haproxy": "haproxy.cfg", "nginx": "nginx.conf", "caddy": "Caddyfile"}[px.name])
	switch px.name {
	case "haproxy":
		cmd := px.command(cfg, px.current.cmd.Process.Pid)
		cmd.Stdout, cmd.Stderr = px.log, px.log
		pr, err := px.procs.start(px.name, cmd, nil)
		if err != nil {
			return err
		}
		px.current = pr
		return nil
	case "nginx":
		return runQuiet(px.log, "nginx", "-p", px.dir, "-c", cfg, "-s", "reload")
	default:
		return runQuiet(px.log, "caddy", "reload", "--config", cfg, "--adapter", "caddyfile",
			"--address", fmt.Sprintf("127.0.0.1:%d", px.admin), "--force")
	}
}

// runQuiet runs a short command to completion, its output to log, bounded
// to 10 s.
func runQuiet(log *os.File, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s %s: still running after 10s", name, strings.Join(args, " "))
	}
}

// version is the proxy's version line, or why there is none.
func proxyVersion(name string) (string, error) {
	var out []byte
	var err error
	switch name {
	case "haproxy":
		out, err = exec.Command("haproxy", "-v").CombinedOutput()
	case "nginx":
		out, err = exec.Command("nginx", "-v").CombinedOutput()
	case "caddy":
		out, err = exec.Command("caddy", "version").CombinedOutput()
	default:
		return "", fmt.Errorf("unknown proxy %q", name)
	}
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line), nil
}

// currentUser names the user the proxies run as.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return fmt.Sprint(os.Geteuid())
}
