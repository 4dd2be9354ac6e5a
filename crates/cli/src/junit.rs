//! JUnit XML for `salvage replay --junit FILE`: one `<testcase>` per capture, one `<failure>` per
//! failed check or missed expectation (an unreadable capture is an `<error>`), so CI systems show
//! each capture as a test.

/// One test case.
pub struct Case {
    /// The capture id (the test's name).
    pub name: String,
    /// The capture file.
    pub file: String,
    /// Failed checks: `(check name, detail)`.
    pub failures: Vec<(String, String)>,
    /// Why the capture could not be run at all.
    pub error: Option<String>,
    /// Extra output (outcome, attempts, journal session).
    pub output: String,
}

/// Escapes text for XML attribute values and character data; characters XML 1.0 cannot carry
/// (most control characters) become `\u{…}` text.
pub fn escape(s: &str) -> String {
    crate::markup::escape_with(s, |c, out| match c {
        '\'' => out.push_str("&apos;"),
        '\n' => out.push_str("&#10;"),
        '\t' => out.push_str("&#9;"),
        '\r' => out.push_str("&#13;"),
        c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => crate::markup::push_visible(c, out),
        c => out.push(c),
    })
}

/// The XML document.
pub fn render(suite: &str, cases: &[Case]) -> String {
    let failures = cases.iter().filter(|c| c.error.is_none() && !c.failures.is_empty()).count();
    let errors = cases.iter().filter(|c| c.error.is_some()).count();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites name=\"salvage\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n  <testsuite name=\"{}\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\">\n",
        escape(suite),
        n = cases.len()
    ));
    for c in cases {
        x.push_str(&format!(
            "    <testcase classname=\"salvage.replay\" name=\"{}\" file=\"{}\">\n",
            escape(&c.name),
            escape(&c.file)
        ));
        if let Some(e) = &c.error {
            x.push_str(&format!(
                "      <error type=\"unreadable\" message=\"{}\">{}</error>\n",
                escape(e),
                escape(e)
            ));
        }
        for (check, detail) in &c.failures {
            x.push_str(&format!(
                "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
                escape(check),
                escape(&format!("{check}: {detail}")),
                escape(detail)
            ));
        }
        if !c.output.is_empty() {
            x.push_str(&format!("      <system-out>{}</system-out>\n", escape(&c.output)));
        }
        x.push_str("    </testcase>\n");
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_stays_well_formed() {
        let cases = vec![Case {
            name: "a<b>&\"c\"".into(),
            file: "x.json".into(),
            failures: vec![("pairing".into(), "bad ]]> \u{1b}[31m\u{0} <tag>".into())],
            error: None,
            output: "outcome recovered".into(),
        }];
        let xml = render("corpus", &cases);
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let f: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("failure")).collect();
        assert_eq!(f.len(), 1);
        assert!(f[0].attribute("message").unwrap().starts_with("pairing: bad ]]>"));
    }
}
