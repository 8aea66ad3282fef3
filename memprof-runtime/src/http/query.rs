//! Query strings: percent-decoded, each parameter at most once, only the parameters a route knows.

use std::collections::BTreeMap;

use super::reply::HttpError;

/// The parameters of one request.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Query(BTreeMap<String, String>);

impl Query {
    /// Parses `query` (the part after `?`), accepting only the parameter names in `known`.
    pub(crate) fn parse(query: &str, known: &[&str]) -> Result<Self, HttpError> {
        let mut parameters = BTreeMap::new();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            if !known.contains(&name.as_ref()) {
                let expected = match known {
                    [] => "this endpoint takes no parameters".to_owned(),
                    _ => format!("expected {}", quote_all(known)),
                };
                return Err(HttpError::bad_request(format!("Unknown parameter '{name}'; {expected}")));
            }
            if parameters.insert(name.to_string(), value.into_owned()).is_some() {
                return Err(HttpError::bad_request(format!("Parameter '{name}' is given more than once")));
            }
        }
        Ok(Self(parameters))
    }

    /// The value of a parameter, if given.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The run id in parameter `name`, if given; 400 when it is not a whole number.
    pub(crate) fn parse_id(&self, name: &str) -> Result<Option<u64>, HttpError> {
        self.get(name)
            .map(|text| {
                text.parse().map_err(|_| {
                    HttpError::bad_request(format!(
                        "Invalid parameter '{name}': '{text}' is not a run id; ids are whole numbers, listed by /memory-profiler/state"
                    ))
                })
            })
            .transpose()
    }

    /// A `true`/`false` parameter, false when absent; 400 for anything else.
    pub(crate) fn flag(&self, name: &str) -> Result<bool, HttpError> {
        match self.get(name) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => {
                Err(HttpError::bad_request(format!("Invalid parameter '{name}': '{other}' is neither true nor false")))
            }
        }
    }
}

fn quote_all(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("'{name}'")).collect();
    quoted.join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_are_true_or_false() {
        let query = |text: &str| Query::parse(text, &["lines"]).unwrap();
        assert_eq!(query("lines=true").flag("lines"), Ok(true));
        assert_eq!(query("").flag("lines"), Ok(false));
        let error = query("lines=yes").flag("lines").unwrap_err();
        assert_eq!(
            (error.status, error.message.as_str()),
            (400, "Invalid parameter 'lines': 'yes' is neither true nor false")
        );
    }

    use super::*;

    #[test]
    fn parameters_are_decoded() {
        let query = Query::parse("duration=1.5%73ecs", &["duration"]).unwrap();
        assert_eq!(query.get("duration"), Some("1.5secs"));
    }

    #[test]
    fn unknown_and_repeated_parameters_are_refused() {
        let unknown = Query::parse("durationn=5mins", &["duration"]).unwrap_err();
        assert_eq!(
            (unknown.status, unknown.message.as_str()),
            (400, "Unknown parameter 'durationn'; expected 'duration'")
        );
        let none = Query::parse("x=1", &[]).unwrap_err();
        assert_eq!(none.message, "Unknown parameter 'x'; this endpoint takes no parameters");
        let repeated = Query::parse("id=1&id=2", &["id"]).unwrap_err();
        assert_eq!(repeated.message, "Parameter 'id' is given more than once");
    }

    #[test]
    fn ids_are_whole_numbers() {
        assert_eq!(Query::parse("id=42", &["id"]).unwrap().parse_id("id"), Ok(Some(42)));
        assert_eq!(Query::parse("", &["id"]).unwrap().parse_id("id"), Ok(None));
        for bad in ["-1", "abc", "1.5", "99999999999999999999999"] {
            let error = Query::parse(&format!("id={bad}"), &["id"]).unwrap().parse_id("id").unwrap_err();
            assert_eq!(error.status, 400, "{bad}");
            assert!(error.message.starts_with(&format!("Invalid parameter 'id': '{bad}'")));
        }
    }
}
