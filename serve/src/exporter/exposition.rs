//! The Prometheus text exposition format (0.0.4) and OpenMetrics 1.0: metric families written
//! either way from one description, so a scrape can answer in the format the client asks for and
//! the history export can share the escaping and number formatting.

use std::fmt::Write as _;

/// The two formats a scraper may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`, what `promtool check metrics` reads.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`, what Prometheus asks for first.
    OpenMetrics,
}

impl Format {
    /// The format for an HTTP `Accept` header: OpenMetrics when the client lists it.
    pub fn negotiate(accept: Option<&str>) -> Self {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Self::OpenMetrics,
            _ => Self::Prometheus,
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A value that goes up and down.
    Gauge,
    /// Samples are named `<name>_total`; OpenMetrics names the family without the suffix.
    Counter,
}

/// One sample: label pairs in a fixed order and a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Label names and values, in the order they are written.
    pub labels: Vec<(&'static str, String)>,
    /// The sample's value.
    pub value: f64,
}

/// A metric family: its name (without `_total` for counters), help text, type and samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The family's name, `lkplake_...`.
    pub name: &'static str,
    /// Its `# HELP` line.
    pub help: &'static str,
    /// Its `# TYPE`.
    pub kind: Kind,
    /// Its samples, written in this order.
    pub samples: Vec<Sample>,
}

impl Family {
    /// A gauge family with no samples yet.
    pub fn gauge(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            help,
            kind: Kind::Gauge,
            samples: Vec::new(),
        }
    }

    /// A counter family with no samples yet.
    pub fn counter(name: &'static str, help: &'static str) -> Self {
        Self {
            kind: Kind::Counter,
            ..Self::gauge(name, help)
        }
    }

    /// Adds a sample.
    pub fn with(mut self, labels: Vec<(&'static str, String)>, value: f64) -> Self {
        self.samples.push(Sample { labels, value });
        self
    }

    /// Writes the family's `# HELP`/`# TYPE` lines and its samples.
    pub fn write(&self, format: Format, out: &mut String) {
        let sample_name = self.sample_name();
        let family_name = match (format, self.kind) {
            (Format::OpenMetrics, _) | (Format::Prometheus, Kind::Gauge) => self.name,
            (Format::Prometheus, Kind::Counter) => sample_name.as_str(),
        };
        let kind = match self.kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        let _ = writeln!(out, "# HELP {family_name} {}", escape_help(self.help));
        let _ = writeln!(out, "# TYPE {family_name} {kind}");
        for sample in &self.samples {
            let labels = sample.labels.iter().map(|(k, v)| (*k, v.as_str()));
            write_sample(out, &sample_name, labels, sample.value, None);
        }
    }

    fn sample_name(&self) -> String {
        match self.kind {
            Kind::Gauge => self.name.to_owned(),
            Kind::Counter => format!("{}_total", self.name),
        }
    }
}

/// Renders families in `format`, with OpenMetrics' closing `# EOF`.
pub fn render(families: &[Family], format: Format) -> String {
    let mut out = String::new();
    for family in families {
        family.write(format, &mut out);
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// Writes one sample line; `timestamp_s` (OpenMetrics: seconds) is for the history export.
/// Labels are borrowed, so a long export allocates nothing per sample.
pub fn write_sample<'a>(
    out: &mut String,
    name: &str,
    labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    value: f64,
    timestamp_s: Option<f64>,
) {
    out.push_str(name);
    let mut labels = labels.into_iter().peekable();
    if labels.peek().is_some() {
        out.push('{');
        for (i, (key, value)) in labels.enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(key);
            out.push_str("=\"");
            escape_label_value(value, out);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&format_value(value));
    if let Some(ts) = timestamp_s {
        out.push(' ');
        out.push_str(&format_value(ts));
    }
    out.push('\n');
}

/// Label values escape backslash, double quote and newline; nothing else is special.
pub fn escape_label_value(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Help text escapes backslash and newline (a double quote is literal there).
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Numbers as both formats spell them: `+Inf`, `-Inf`, `NaN`, else Rust's shortest round-trip
/// decimal, which Go's `ParseFloat` reads back exactly.
pub fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_owned()
    } else if value == f64::INFINITY {
        "+Inf".to_owned()
    } else if value == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslash_quote_and_newline_only() {
        let mut out = String::new();
        escape_label_value("a\\b\"c\nd,e=f{g}", &mut out);
        assert_eq!(out, "a\\\\b\\\"c\\nd,e=f{g}");
    }

    #[test]
    fn counters_carry_total_on_samples_and_on_the_prometheus_family_only() {
        let family = Family::counter("lkp_ingest_messages", "Messages.")
            .with(vec![("topic", "lkp.reports".to_owned())], 3.0);
        assert_eq!(
            render(std::slice::from_ref(&family), Format::Prometheus),
            "# HELP lkp_ingest_messages_total Messages.\n\
             # TYPE lkp_ingest_messages_total counter\n\
             lkp_ingest_messages_total{topic=\"lkp.reports\"} 3\n"
        );
        assert_eq!(
            render(&[family], Format::OpenMetrics),
            "# HELP lkp_ingest_messages Messages.\n\
             # TYPE lkp_ingest_messages counter\n\
             lkp_ingest_messages_total{topic=\"lkp.reports\"} 3\n\
             # EOF\n"
        );
    }

    #[test]
    fn special_and_large_values_are_spelled_the_way_prometheus_parses_them() {
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(235_200_000.0), "235200000");
        assert_eq!(format_value(0.1), "0.1");
        assert_eq!(format_value(-4.8), "-4.8");
    }

    #[test]
    fn history_samples_carry_a_timestamp_in_seconds() {
        let mut out = String::new();
        write_sample(
            &mut out,
            "lkp_headline_value",
            [("metric", "vm-scalability.throughput")],
            316_400_000.0,
            Some(1_674_086_400.0),
        );
        assert_eq!(
            out,
            "lkp_headline_value{metric=\"vm-scalability.throughput\"} 316400000 1674086400\n"
        );
    }

    #[test]
    fn prometheus_asks_for_openmetrics_and_curl_gets_text() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Prometheus);
        assert_eq!(Format::negotiate(None), Format::Prometheus);
    }
}
