//! Integration tests: the real binary over loopback, as a user runs it.
//! Regression tests are named after what they guard.

mod helpers;
mod lab;
mod probe;

mod admission;
mod agent;
mod auth;
mod bad_input;
mod bounds;
mod crr;
mod experiment;
mod hooks;
mod hostile;
mod http;
mod http_server;
mod lab_arms;
mod lab_cli;
mod lab_clients;
mod lab_common;
mod lab_element;
mod lab_groups;
mod lab_lan;
mod lab_overload;
mod lab_owd;
mod lab_owd2;
mod lab_plan;
mod lab_results;
mod lab_tcprr;
mod lab_topology;
mod link_local;
mod measure;
mod neighbours;
mod plot;
mod progress;
mod report;
mod rr;
mod server_host;
mod stream;
mod study_gigabit;
mod study_ia64;
mod study_ipfilter;
mod study_ipqos;
mod study_scavenger;
mod truth;
mod udp;
