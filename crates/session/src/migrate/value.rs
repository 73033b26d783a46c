//! A JSON value that stays the stored text until a stage needs to look inside it, so an
//! event DSH's migration does not reshape is written back byte for byte, and one it does
//! reshape follows JavaScript's object-spread key order: kept keys stay in place, added
//! keys go last, removed keys leave no gap.

use std::borrow::Cow;

use crate::json::{write_js_string, JsonKind, JsonRef};

/// One JSON value: stored text (borrowed or made here), or an object or array opened up.
#[derive(Debug, Clone)]
pub(crate) enum Val<'a> {
    Raw(&'a str),
    Text(String),
    Obj(Obj<'a>),
    Arr(Vec<Val<'a>>),
}

/// A member read without opening its container: stored text, or a value opened before.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Peek<'v> {
    Json(JsonRef<'v>),
    Val(&'v Val<'v>),
}

impl<'v> Peek<'v> {
    /// Member `key` of this member.
    pub(crate) fn peek(self, key: &str) -> Option<Peek<'v>> {
        match self {
            Peek::Json(json) => json.get(key).map(Peek::Json),
            Peek::Val(val) => val.peek(key),
        }
    }

    pub(crate) fn as_str(self) -> Option<Cow<'v, str>> {
        match self {
            Peek::Json(json) => json.as_str(),
            Peek::Val(_) => None,
        }
    }
}

/// An object's members in order.
pub(crate) type Obj<'a> = Vec<(Cow<'a, str>, Val<'a>)>;

impl<'a> Val<'a> {
    pub(crate) fn int(value: u64) -> Val<'a> {
        Val::Text(value.to_string())
    }

    pub(crate) fn string(value: &str) -> Val<'a> {
        let mut out = String::with_capacity(value.len() + 2);
        write_js_string(&mut out, value);
        Val::Text(out)
    }

    pub(crate) fn literal(json: &'static str) -> Val<'a> {
        Val::Raw(json)
    }

    fn text(&self) -> Option<&str> {
        match self {
            Val::Raw(text) => Some(text),
            Val::Text(text) => Some(text),
            Val::Obj(_) | Val::Arr(_) => None,
        }
    }

    /// The value as stored text, for reading scalars.
    fn json(&self) -> Option<JsonRef<'_>> {
        self.text().map(JsonRef::new)
    }

    pub(crate) fn as_str(&self) -> Option<Cow<'_, str>> {
        self.json()?.as_str()
    }

    pub(crate) fn as_u64(&self) -> Option<u64> {
        self.json()?.as_seq()
    }

    pub(crate) fn as_i64(&self) -> Option<i64> {
        self.json()?.as_safe_integer()
    }

    pub(crate) fn as_bool(&self) -> Option<bool> {
        self.json()?.as_bool()
    }

    pub(crate) fn is_object(&self) -> bool {
        match self {
            Val::Obj(_) => true,
            Val::Arr(_) => false,
            _ => self.json().is_some_and(|j| j.kind() == JsonKind::Object),
        }
    }

    /// Member `key` of an object value as a value of its own, without opening this one up
    /// (stored text stays borrowed).
    pub(crate) fn member(&self, key: &str) -> Option<Val<'a>> {
        match self {
            Val::Raw(text) => {
                let text: &'a str = text;
                JsonRef::new(text).get(key).map(|j| Val::Raw(j.raw()))
            }
            Val::Text(text) => JsonRef::new(text)
                .get(key)
                .map(|j| Val::Text(j.raw().to_owned())),
            Val::Obj(members) => members
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone()),
            Val::Arr(_) => None,
        }
    }

    /// Members `keys` of an object value, found in one pass over stored text (its large
    /// members skipped once, not once per key), as [`Val::member`] finds each.
    pub(crate) fn members<const N: usize>(&self, keys: [&str; N]) -> [Option<Val<'a>>; N] {
        match self {
            Val::Raw(text) => {
                let text: &'a str = text;
                JsonRef::new(text)
                    .fields(keys)
                    .map(|j| j.map(|j| Val::Raw(j.raw())))
            }
            Val::Text(text) => JsonRef::new(text)
                .fields(keys)
                .map(|j| j.map(|j| Val::Text(j.raw().to_owned()))),
            Val::Obj(_) | Val::Arr(_) => keys.map(|key| self.member(key)),
        }
    }

    /// Member `key` of an object value, read without opening stored text up.
    pub(crate) fn peek(&self, key: &str) -> Option<Peek<'_>> {
        match self {
            Val::Obj(members) => members
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| match v {
                    Val::Raw(text) => Peek::Json(JsonRef::new(text)),
                    Val::Text(text) => Peek::Json(JsonRef::new(text)),
                    other => Peek::Val(other),
                }),
            Val::Arr(_) => None,
            _ => self.json()?.get(key).map(Peek::Json),
        }
    }

    /// The string member `key`, read without opening anything up.
    pub(crate) fn peek_str(&self, key: &str) -> Option<Cow<'_, str>> {
        self.peek(key)?.as_str()
    }

    /// Whether member `key` is present, read without opening anything up.
    pub(crate) fn peek_has(&self, key: &str) -> bool {
        self.peek(key).is_some()
    }

    /// The object's members, opening stored text up; None for a non-object.
    pub(crate) fn obj(&mut self) -> Option<&mut Obj<'a>> {
        if let Val::Raw(text) = *self {
            let json = JsonRef::new(text);
            if json.kind() == JsonKind::Object {
                *self = Val::Obj(
                    json.members()
                        .map(|(k, v)| (k, Val::Raw(v.raw())))
                        .collect(),
                );
            }
        }
        if let Val::Text(text) = self {
            let json = JsonRef::new(text);
            if json.kind() == JsonKind::Object {
                let members: Vec<(Cow<'a, str>, Val<'a>)> = json
                    .members()
                    .map(|(k, v)| (Cow::Owned(k.into_owned()), Val::Text(v.raw().to_owned())))
                    .collect();
                *self = Val::Obj(members);
            }
        }
        match self {
            Val::Obj(members) => Some(members),
            _ => None,
        }
    }

    /// The array's elements, opening stored text up; None for a non-array.
    pub(crate) fn arr(&mut self) -> Option<&mut Vec<Val<'a>>> {
        if let Val::Raw(text) = *self {
            let json = JsonRef::new(text);
            if json.kind() == JsonKind::Array {
                *self = Val::Arr(json.elements().map(|v| Val::Raw(v.raw())).collect());
            }
        }
        if let Val::Text(text) = self {
            let json = JsonRef::new(text);
            if json.kind() == JsonKind::Array {
                let elements: Vec<Val<'a>> = json
                    .elements()
                    .map(|v| Val::Text(v.raw().to_owned()))
                    .collect();
                *self = Val::Arr(elements);
            }
        }
        match self {
            Val::Arr(elements) => Some(elements),
            _ => None,
        }
    }

    /// Member `key` of an object value.
    pub(crate) fn get(&mut self, key: &str) -> Option<&mut Val<'a>> {
        get(self.obj()?, key)
    }

    /// The array as seqs, when every element is one.
    pub(crate) fn seq_list(&mut self) -> Option<Vec<u64>> {
        self.arr()?.iter().map(Val::as_u64).collect()
    }

    /// The value's JSON text, borrowed when it is stored text.
    pub(crate) fn text_cow(&self) -> Cow<'_, str> {
        match self.text() {
            Some(text) => Cow::Borrowed(text),
            None => Cow::Owned(self.to_text()),
        }
    }

    /// The value's JSON text.
    pub(crate) fn to_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    pub(crate) fn write(&self, out: &mut String) {
        match self {
            Val::Raw(text) => out.push_str(text),
            Val::Text(text) => out.push_str(text),
            Val::Obj(members) => write_obj(members, out),
            Val::Arr(elements) => {
                out.push('[');
                for (i, element) in elements.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    element.write(out);
                }
                out.push(']');
            }
        }
    }
}

/// The JSON text of a value (empty for an absent one), for comparing values as DSH's
/// strict equality compares numbers and strings.
pub(crate) fn text_of(value: Option<&mut Val<'_>>) -> String {
    value.map_or_else(String::new, |value| value.to_text())
}

pub(crate) fn write_obj(members: &Obj<'_>, out: &mut String) {
    out.push('{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_js_string(out, key);
        out.push(':');
        value.write(out);
    }
    out.push('}');
}

pub(crate) fn get<'o, 'a>(members: &'o mut Obj<'a>, key: &str) -> Option<&'o mut Val<'a>> {
    members.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
}

pub(crate) fn has(members: &Obj<'_>, key: &str) -> bool {
    members.iter().any(|(k, _)| k == key)
}

/// `{...members, key: value}`: replaces in place, or appends.
pub(crate) fn set<'a>(members: &mut Obj<'a>, key: &'static str, value: Val<'a>) {
    match members.iter_mut().find(|(k, _)| k == key) {
        Some((_, slot)) => *slot = value,
        None => members.push((Cow::Borrowed(key), value)),
    }
}

/// Removes member `key`, returning its value.
pub(crate) fn remove<'a>(members: &mut Obj<'a>, key: &str) -> Option<Val<'a>> {
    let index = members.iter().position(|(k, _)| k == key)?;
    Some(members.remove(index).1)
}

/// A list of seqs as a JSON array.
pub(crate) fn seq_array<'a>(seqs: &[u64]) -> Val<'a> {
    Val::Arr(seqs.iter().map(|s| Val::int(*s)).collect())
}
