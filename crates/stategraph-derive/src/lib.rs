//! `#[derive(State)]`: turns a struct into a stategraph state — one channel per field, a
//! reducer per field, and a generated partial-update type.
//!
//! (A proc-macro crate cannot run its own examples; this one runs as the crate-level example
//! of `stategraph`.)
//!
//! ```text
//! use stategraph::State;
//!
//! #[derive(State, Clone, Debug, Default)]
//! struct Seed {
//!     foo: String,              // last value wins (the default)
//!     #[reducer(append)]
//!     bar: Vec<String>,         // lists are concatenated
//! }
//! // Generated: `SeedUpdate { foo: Option<String>, bar: Option<Vec<String>> }` with a setter
//! // per field: `SeedUpdate::default().foo("a").bar(["a"])` — a field takes anything that
//! // converts into its type, a `Vec<T>` field anything iterable whose items convert into `T`.
//! ```
//!
//! Reducers: `append` (list concatenation), `add` (numbers), `merge` (maps),
//! `add_messages` (LangGraph's id-based message merge), or `custom = path::to::fn` for any
//! `fn(T, T) -> T`. Adding `delta` (`#[reducer(add_messages, delta)]`, or `delta = 50` for
//! a snapshot every 50 updates instead of 100) stores the field as LangGraph's
//! `DeltaChannel`: checkpoints keep only what changed. `#[managed(remaining_steps)]` (an
//! integer field) and `#[managed(is_last_step)]` (a boolean) are LangGraph's managed values
//! `RemainingSteps` and `IsLastStep`: the engine fills them in for each step, nodes never
//! write them (the update type has no such field), and they are never stored. Field types must implement `serde::Serialize`, `DeserializeOwned` and
//! `Default` (a key without a value reads as the default). The generated code refers to the
//! `stategraph` crate.

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, Ident, Path, parse_macro_input, spanned::Spanned};

/// Derives `stategraph::State` for a struct with named fields. See the crate docs.
#[proc_macro_derive(State, attributes(reducer, managed))]
pub fn derive_state(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

enum ReducerKind {
    LastValue,
    Builtin(Ident),
    Custom(Path),
}

/// The field's managed kind (`#[managed(remaining_steps)]`, `#[managed(is_last_step)]`), if any.
fn managed_of(field: &syn::Field) -> syn::Result<Option<Ident>> {
    let mut kind = None;
    for attr in &field.attrs {
        if !attr.path().is_ident("managed") {
            continue;
        }
        attr.parse_nested_meta(|meta| {
            let variant = match meta.path.get_ident().map(Ident::to_string).as_deref() {
                Some("remaining_steps") => "RemainingSteps",
                Some("is_last_step") => "IsLastStep",
                _ => {
                    return Err(meta.error(
                        "unknown managed value (expected remaining_steps or is_last_step)",
                    ));
                }
            };
            kind = Some(Ident::new(variant, Span::call_site()));
            Ok(())
        })?;
    }
    Ok(kind)
}

/// The field's reducer, and its snapshot frequency when it is stored as deltas.
fn reducer_of(field: &syn::Field) -> syn::Result<(ReducerKind, Option<syn::Expr>)> {
    let mut kind = ReducerKind::LastValue;
    let mut delta = None;
    for attr in &field.attrs {
        if !attr.path().is_ident("reducer") {
            continue;
        }
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("custom") {
                let value = meta.value()?;
                kind = ReducerKind::Custom(value.parse()?);
                return Ok(());
            }
            if meta.path.is_ident("delta") {
                delta = Some(if meta.input.peek(syn::Token![=]) {
                    meta.value()?.parse()?
                } else {
                    syn::parse_quote!(100)
                });
                return Ok(());
            }
            let Some(ident) = meta.path.get_ident() else {
                return Err(meta.error("expected a reducer name"));
            };
            match ident.to_string().as_str() {
                "append" | "add" | "merge" | "add_messages" => {
                    kind = ReducerKind::Builtin(ident.clone());
                    Ok(())
                }
                other => Err(meta.error(format!(
                    "unknown reducer `{other}` (expected append, add, merge, add_messages or \
                     custom = path::to::fn, optionally with delta or delta = N)"
                ))),
            }
        })?;
    }
    if delta.is_some() && matches!(kind, ReducerKind::LastValue) {
        return Err(syn::Error::new(
            field.span(),
            "`delta` stores a reducer's updates as deltas: name the reducer too, e.g. \
             #[reducer(append, delta)]",
        ));
    }
    Ok((kind, delta))
}

/// The item type of a field written `Vec<T>` (the last path segment `Vec` with one type
/// argument), whose grown lists are converted item by item.
fn vec_item(ty: &syn::Type) -> Option<&syn::Type> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Vec" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first() {
        Some(syn::GenericArgument::Type(t)) if args.args.len() == 1 => Some(t),
        _ => None,
    }
}

fn expand(input: &DeriveInput) -> syn::Result<Tokens> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(
            input.span(),
            "#[derive(State)] needs a struct with named fields",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new(
            input.span(),
            "#[derive(State)] needs a struct with named fields",
        ));
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            "#[derive(State)] does not support generic structs",
        ));
    }
    let krate = quote!(::stategraph);
    let name = &input.ident;
    let vis = &input.vis;
    let update = format_ident!("{}Update", name);

    let mut schema = Vec::new();
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    let mut update_fields = Vec::new();
    let mut setters = Vec::new();
    let mut touched = Vec::new();
    let mut names = Vec::new();
    let mut reuses = Vec::new();
    for field in &fields.named {
        let Some(ident) = &field.ident else { continue };
        let ty = &field.ty;
        let key = ident.to_string();
        let key_lit = syn::LitStr::new(&key, Span::call_site());
        let managed = managed_of(field)?;
        let (kind, delta) = reducer_of(field)?;
        let reducer = match kind {
            ReducerKind::LastValue => None,
            ReducerKind::Builtin(r) => Some(quote!(#krate::graph::Reducer::#r())),
            ReducerKind::Custom(f) => Some(quote! {
                #krate::graph::Reducer::new(stringify!(#f), None, |cur, upd| {
                    let cur: #ty = #krate::graph::read_field(#key_lit, &cur)
                        .map_err(|e| e.to_string())?;
                    let upd: #ty = #krate::graph::read_field(#key_lit, &upd)
                        .map_err(|e| e.to_string())?;
                    #krate::graph::write_field(#f(cur, upd)).map_err(|e| e.to_string())
                })
            }),
        };
        let spec = match (&managed, reducer, delta) {
            (Some(m), None, _) => {
                quote!(schema = schema.managed(#key_lit, #krate::graph::Managed::#m);)
            }
            (Some(_), Some(_), _) => {
                return Err(syn::Error::new(
                    field.span(),
                    "a managed value is computed, not written: it takes no reducer",
                ));
            }
            (None, None, _) => quote!(schema = schema.last_value(#key_lit);),
            (None, Some(r), None) => quote!(schema = schema.reducer(#key_lit, #r);),
            (None, Some(r), Some(n)) => quote!(schema = schema.delta(#key_lit, #r, #n);),
        };
        schema.push(spec);
        touched.push(quote!(&self.#ident,));
        let previous = format_ident!("previous_{}", ident);
        names.push(quote!(#ident: #previous,));
        let reuse = match vec_item(ty) {
            Some(item) => quote!(#krate::graph::reuse_vec_field::<#item>),
            None => quote!(#krate::graph::reuse_field::<#ty>),
        };
        reuses.push(quote! {
            #ident: #reuse(#key_lit, values.get(#key_lit), before.get(#key_lit), #previous)?,
        });
        reads.push(quote! {
            #ident: match values.get(#key_lit) {
                Some(v) => #krate::graph::read_field::<#ty>(#key_lit, v)?,
                None => ::core::default::Default::default(),
            },
        });
        if managed.is_some() {
            // Computed by the engine for each step: nothing to write.
            continue;
        }
        writes.push(quote! {
            if let Some(v) = update.#ident {
                writes.push((#key_lit.to_owned(), #krate::graph::write_field(v)?));
            }
        });
        let doc = format!("New value (or reducer input) for `{key}`.");
        update_fields.push(quote! {
            #[doc = #doc]
            pub #ident: ::core::option::Option<#ty>,
        });
        setters.push(match vec_item(ty) {
            Some(item) => {
                let doc = format!(
                    "Sets `{key}` to these items: anything iterable (an array, a `Vec`, an \
                     iterator) whose items convert into the field's."
                );
                quote! {
                    #[doc = #doc]
                    pub fn #ident(
                        mut self,
                        items: impl ::core::iter::IntoIterator<
                            Item = impl ::core::convert::Into<#item>,
                        >,
                    ) -> Self {
                        self.#ident = Some(
                            items
                                .into_iter()
                                .map(::core::convert::Into::into)
                                .collect(),
                        );
                        self
                    }
                }
            }
            None => {
                let doc =
                    format!("Sets `{key}` (to anything that converts into the field's type).");
                quote! {
                    #[doc = #doc]
                    pub fn #ident(mut self, value: impl ::core::convert::Into<#ty>) -> Self {
                        self.#ident = Some(value.into());
                        self
                    }
                }
            }
        });
    }
    let update_doc = format!("A partial update of [`{name}`]: `None` fields are not written.");
    Ok(quote! {
        #[doc = #update_doc]
        #[derive(Clone, Debug, Default)]
        #vis struct #update {
            #(#update_fields)*
        }

        impl #update {
            #(#setters)*
        }

        impl #krate::graph::State for #name {
            type Update = #update;

            fn schema() -> #krate::graph::Schema {
                let mut schema = #krate::graph::Schema::new();
                #(#schema)*
                schema
            }

            fn json_schema() -> ::core::option::Option<#krate::__serde_json::Value> {
                #[allow(unused_imports)]
                use #krate::graph::__schema::{NoJsonSchema as _, ViaJsonSchema as _};
                (&&#krate::graph::__schema::Probe::<Self>::new()).json_schema()
            }

            fn from_values(
                values: &#krate::graph::Values,
            ) -> ::core::result::Result<Self, #krate::graph::GraphError> {
                Ok(Self { #(#reads)* })
            }

            fn from_values_reusing(
                values: &#krate::graph::Values,
                previous: ::core::option::Option<(Self, &#krate::graph::Values)>,
            ) -> ::core::result::Result<Self, #krate::graph::GraphError> {
                let ::core::option::Option::Some((previous, before)) = previous else {
                    return Self::from_values(values);
                };
                let Self { #(#names)* } = previous;
                Ok(Self { #(#reuses)* })
            }

            fn __touch_fields(&self) {
                let _ = (#(#touched)*);
            }

            fn into_writes(
                update: #update,
            ) -> ::core::result::Result<
                ::std::vec::Vec<(::std::string::String, #krate::Value)>,
                #krate::graph::GraphError,
            > {
                let mut writes = ::std::vec::Vec::new();
                #(#writes)*
                Ok(writes)
            }
        }
    })
}
