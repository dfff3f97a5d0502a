{#- Settings are checked before anything runs. `vars_spec` is the one declarative list of what
    each var of dbt_project.yml may hold (one line per var: a new var is one line here and one in
    dbt_project.yml; tests/house/test_settings.py checks that the two lists agree).

    The list is a Jinja dict, which is also a Python literal (the tests read it with
    ast.literal_eval). It was YAML text parsed by fromyaml at every call, two calls per checked
    var: 0.9 s of the national build's interpreter lock (py-spy --gil), for a literal Jinja
    builds in microseconds.

    Keys of a var's entry:
      values: [a, b]        one of these (text)
      type:                 int | number | bool | text | region_list | code_list | period
      digits:               code_list only: codes of 1 to this many digits (e.g. 5 for communes)
      min / max:            inclusive bounds (int, number); a var name means "that var's value"
      above / below:        exclusive bounds (number)
      optional: True        null (or empty text) is allowed: "not set", see the comment in dbt_project.yml

    trend_method's values are a copy of the method codes of seeds/trend_methods.csv (their one
    home): this check runs while dbt parses, before any seed is loaded, and dbt's Jinja cannot
    read a file, so the list is spelled here; tests/trends/test_trend_methods.py fails when the
    two differ.
-#}
{% macro vars_spec() -%}
{%- set spec = {
    'vital_source':               {'values': ['ine_aggregates', 'deis_microdata']},
    'raw_data_dir':               {'type': 'text'},
    'deis_deaths_path':           {'type': 'text', 'optional': True},
    'deis_births_path':           {'type': 'text', 'optional': True},
    'deis_encoding':              {'values': ['auto', 'latin-1', 'latin1', 'iso-8859-1', 'utf-8', 'utf8']},
    'deis_cache_dir':             {'type': 'text'},
    'unknown_age_unit_policy':    {'values': ['infant_age_unknown', 'exclude']},
    'scope_regions':              {'type': 'region_list'},
    'scope_year_start':           {'type': 'int', 'optional': True},
    'scope_year_end':             {'type': 'int', 'optional': True, 'min': 'scope_year_start'},
    'custom_period':              {'type': 'period', 'optional': True},
    'births_denominator':         {'values': ['registered', 'corrected']},
    'unreliable_below_deaths':    {'type': 'int', 'min': 0},
    'suppress_small_counts':      {'type': 'bool'},
    'suppress_min_deaths':        {'type': 'int', 'min': 0},
    'suppress_max_deaths':        {'type': 'int', 'min': 'suppress_min_deaths'},
    'comparison_alpha':           {'type': 'number', 'above': 0, 'below': 1},
    'exceedance_probability_threshold':{'type': 'number', 'above': 0.5, 'below': 1},
    'cluster_fdr_alpha':          {'type': 'number', 'above': 0, 'below': 1},
    'cluster_permutations':       {'type': 'int', 'min': 99},
    'trend_min_years':            {'type': 'int', 'min': 3},
    'trend_zero_rate_policy':     {'values': ['drop', 'add_half_death']},
    'trend_p_threshold':          {'type': 'number', 'above': 0, 'below': 1},
    'trend_ci_level':             {'type': 'number', 'above': 0, 'below': 1},
    'trend_ci_critical':          {'values': ['t', 'normal']},
    'trend_rhotype':              {'values': ['regress', 'freg', 'tscorr', 'dw', 'theil', 'nagar']},
    'trend_method':               {'values': ['prais_winsten', 'poisson', 'joinpoint']},
    'trend_prais_variant':        {'values': ['prais', 'corc', 'ols']},
    'trend_max_abs_rho':          {'type': 'number', 'above': 0, 'max': 1},
    'trend_min_deaths':           {'type': 'int', 'min': 0},
    'trend_max_joinpoints':       {'type': 'int', 'optional': True, 'min': 0},
    'trend_joinpoint_selection':  {'values': ['permutation', 'bic']},
    'trend_gaps':                 {'values': ['restart', 'consecutive']},
    'input_year_min':             {'type': 'int'},
    'input_year_max':             {'type': 'int', 'optional': True, 'min': 'input_year_min'},
    'implausible_rate_per_1000':  {'type': 'number', 'above': 0},
    'implausible_rate_min_deaths':{'type': 'int', 'min': 0},
    'derived_count_tolerance':    {'type': 'int', 'min': 0},
    'max_plausible_count':        {'type': 'int', 'min': 1},
    'max_births_ratio':           {'type': 'number', 'above': 1},
    'births_ratio_margin':        {'type': 'int', 'min': 0},
    'benchmark_min_deaths':       {'type': 'int', 'min': 0},
    'benchmark_communes':         {'type': 'code_list', 'digits': 5},
    'deis_zip_max_member_bytes':  {'type': 'int', 'min': 1},
    'deis_zip_max_ratio':         {'type': 'number', 'above': 0},
    'deis_gzip_max_ratio':        {'type': 'number', 'min': 1},
    'deis_empty_files':           {'values': ['stop', 'audit']},
    'deis_malformed_records':     {'values': ['stop', 'audit']},
    'deis_births_control_path':   {'type': 'text', 'optional': True},
    'duckdb_memory_limit':        {'type': 'text'},
    'duckdb_temp_directory':      {'type': 'text', 'optional': True},
    'funnel_winsor_trim':         {'type': 'number', 'min': 0, 'below': 0.5},
    'peer_count':                 {'type': 'int', 'min': 1, 'max': 100},
    'inequality_bootstrap_replicates':{'type': 'int', 'min': 100},
    'inequality_bootstrap_replicates_yearly':{'type': 'int', 'min': 100},
    'inequality_min_deaths':      {'type': 'int', 'min': 0},
    'external_deaths_tolerance_percent':{'type': 'number', 'above': 0},
    'official_anchor_tolerance_percent':{'type': 'number', 'above': 0},
} -%}
{{ return(spec) }}
{%- endmacro %}


{#- The fewest usable years each trend fitter accepts: a copy of the fitters' min_years_floor
    (python/infant_mortality/statistics/trend_fitters/, their one home), so that validate_vars
    can refuse trend_min_years before the build; tests/house/test_settings.py checks that the
    two agree. -#}
{% macro trend_fitter_floors() -%}
    {{ return({'prais': 4, 'corc': 5, 'ols': 3, 'poisson': 3, 'joinpoint': 3}) }}
{%- endmacro %}


{#- on-run-start (dbt_project.yml): every declared var is valid, and every var given with --vars
    is declared. It runs while dbt parses the project (execute is false), so a bad value stops
    `dbt build`, `parse`, `ls` and `docs` within seconds, before any model; it runs again when
    the hooks execute (a partial parse may skip the first run), then also checks that
    raw_data_dir holds files. All problems are reported at once. -#}
{% macro validate_vars() -%}
    {%- set spec = vars_spec() -%}
    {%- set problems = [] -%}
    {%- for name in invocation_args_dict.get('vars', {}) if name not in spec -%}
        {%- do problems.append(unknown_var_message(name, spec.keys() | list)) -%}
    {%- endfor -%}
    {%- for name in spec -%}
        {%- if not var.has_var(name) -%}
            {%- do problems.append("dbt var " ~ name ~ " is in vars_spec (macros/validate_vars.sql) but not declared in dbt_project.yml") -%}
        {%- else -%}
            {%- set problem = var_problem(name, spec) -%}
            {%- if problem -%}{%- do problems.append(problem) -%}{%- endif -%}
        {%- endif -%}
    {%- endfor -%}
    {#- A trend class says whether the APC interval beside it excludes 0 only when the two levels match. -#}
    {%- if not problems and ((var('trend_ci_level') | float) + (var('trend_p_threshold') | float) - 1) | abs > 1e-9 -%}
        {%- do problems.append("dbt var trend_ci_level (" ~ var('trend_ci_level') ~ ") must be 1 - trend_p_threshold (" ~ var('trend_p_threshold') ~ "): the trend class must agree with the interval beside it") -%}
    {%- endif -%}
    {#- fct_trends fits every method of MART_METHODS (trend_prais_variant for the Prais-Winsten
        rows): trend_min_years below a fitter's floor passed this check and failed inside the
        trend model, minutes later. -#}
    {%- if not problems -%}
        {%- set floors = trend_fitter_floors() -%}
        {%- set fitted = [var('trend_prais_variant'), 'poisson', 'joinpoint'] -%}
        {%- set floor = namespace(years=0, fitter='') -%}
        {%- for fitter in fitted if floors[fitter] > floor.years -%}
            {%- set floor.years = floors[fitter] -%}
            {%- set floor.fitter = fitter -%}
        {%- endfor -%}
        {%- if (var('trend_min_years') | int) < floor.years -%}
            {%- do problems.append("dbt var trend_min_years (" ~ var('trend_min_years') ~ ") must be at least " ~ floor.years
                ~ ": fct_trends fits the Prais-Winsten rows with trend_prais_variant " ~ var('trend_prais_variant')
                ~ ", which needs " ~ floor.years ~ " usable years (floors: prais " ~ floors['prais'] ~ ", corc " ~ floors['corc']
                ~ ", ols " ~ floors['ols'] ~ "; poisson and joinpoint " ~ floors['poisson'] ~ "). Set trend_min_years to " ~ floor.years
                ~ " or more, or trend_prais_variant to one whose floor is at most " ~ var('trend_min_years')) -%}
        {%- endif -%}
    {%- endif -%}
    {%- if problems -%}
        {{ exceptions.raise_compiler_error(invalid_settings_message(problems)) }}
    {%- endif -%}
    {%- if execute %}
    -- raw_data_dir names a folder with files (a mistyped folder is named here, not as a missing CSV).
    select case when count(*) = 0
        then error({{ sql_string("dbt var raw_data_dir: no files in folder '" ~ var('raw_data_dir') ~ "'") }}) end
    from glob({{ sql_string(duckdb_literal_path(var('raw_data_dir')) ~ '/*') }})
    {%- endif -%}
{%- endmacro %}


{#- The value of a declared var after checking it against vars_spec, normalised to its type:
    int -> int, number -> float, region_list -> list of 2-character codes, period -> {start, end}.
    Stops the build with a message naming the var and what it may hold. -#}
{% macro setting(name) -%}
    {%- set spec = vars_spec() -%}
    {%- if name not in spec -%}
        {{ exceptions.raise_compiler_error("dbt var " ~ name ~ " has no entry in vars_spec (macros/validate_vars.sql): declare what it may hold there") }}
    {%- endif -%}
    {%- set problem = var_problem(name, spec) -%}
    {%- if problem -%}
        {{ exceptions.raise_compiler_error(invalid_settings_message([problem])) }}
    {%- endif -%}
    {{ return(normalised_value(var(name), spec[name])) }}
{%- endmacro %}


{% macro invalid_settings_message(problems) -%}
    {{ return("Invalid settings (dbt vars, declared with their defaults in dbt_project.yml):\n  " ~ problems | join("\n  ")) }}
{%- endmacro %}


{#- Null if the var's value fits its spec, else one sentence naming the var, what it may hold and
    what it got. -#}
{% macro var_problem(name, spec) -%}
    {%- set rule = spec[name] -%}
    {%- set value = var(name) -%}
    {%- set kind = rule.get('type', 'values' if 'values' in rule else 'text') -%}
    {%- set shown = "'" ~ value ~ "'" if value is string else tojson(value) -%}
    {%- if value is none or (value == '' and rule.get('optional')) -%}
        {{ return(none if rule.get('optional') else "dbt var " ~ name ~ " must be set (" ~ allowed_text(rule, spec) ~ ")") }}
    {%- endif -%}
    {%- if 'values' in rule -%}
        {%- if value is not string or value not in rule['values'] -%}
            {{ return("dbt var " ~ name ~ " must be one of " ~ rule['values'] | join(", ") ~ "; got " ~ shown) }}
        {%- endif -%}
    {%- elif kind in ('int', 'number') -%}
        {%- set pattern = '^-?[0-9]+$' if kind == 'int' else '^-?[0-9]+([.][0-9]+)?$' -%}
        {%- if value is boolean or value is mapping or (value is not number and not modules.re.match(pattern, value | string))
                or (kind == 'int' and value is float) -%}
            {{ return("dbt var " ~ name ~ " must be " ~ allowed_text(rule, spec) ~ "; got " ~ shown) }}
        {%- endif -%}
        {%- set number = value | float -%}
        {%- for bound, holds in [('min', 'ge'), ('max', 'le'), ('above', 'gt'), ('below', 'lt')] if bound in rule -%}
            {%- set limit = bound_value(rule[bound], spec) -%}
            {%- if limit is not none and not (
                    (holds == 'ge' and number >= limit) or (holds == 'le' and number <= limit)
                    or (holds == 'gt' and number > limit) or (holds == 'lt' and number < limit)) -%}
                {{ return("dbt var " ~ name ~ " must be " ~ allowed_text(rule, spec) ~ "; got " ~ shown) }}
            {%- endif -%}
        {%- endfor -%}
    {%- elif kind == 'bool' -%}
        {%- if value is not boolean -%}
            {{ return("dbt var " ~ name ~ " must be true or false; got " ~ shown) }}
        {%- endif -%}
    {%- elif kind == 'text' -%}
        {%- if value is not string or value | trim == '' -%}
            {{ return("dbt var " ~ name ~ " must be non-empty text; got " ~ shown) }}
        {%- endif -%}
    {%- elif kind in ('region_list', 'code_list') -%}
        {%- set digits = rule.get('digits', 2) -%}
        {%- set bad = [] -%}
        {%- if value is string or value is mapping or value is not iterable -%}
            {%- do bad.append(value) -%}
        {%- else -%}
            {%- for code in value if code is boolean or not modules.re.match('^[0-9]{1,' ~ digits ~ '}$', code | string) or (code | int) == 0 -%}
                {%- do bad.append(code) -%}
            {%- endfor -%}
        {%- endif -%}
        {%- if bad and kind == 'region_list' -%}
            {{ return("dbt var " ~ name ~ " must be a list of region codes of 1 or 2 digits, e.g. [13] or [5, 13] ([] = every region in the input); got " ~ shown) }}
        {%- elif bad -%}
            {{ return("dbt var " ~ name ~ " must be a list of codes of 1 to " ~ digits ~ " digits ([] = none); got " ~ shown) }}
        {%- endif -%}
    {%- elif kind == 'period' -%}
        {%- set year = '^[0-9]{4}$' -%}
        {%- if value is not mapping or value.keys() | list | sort != ['end', 'start']
                or value['start'] is boolean or value['end'] is boolean
                or not modules.re.match(year, value['start'] | string) or not modules.re.match(year, value['end'] | string)
                or (value['start'] | int) > (value['end'] | int) -%}
            {{ return("dbt var " ~ name ~ " must be {start: YYYY, end: YYYY} with start <= end; got " ~ shown) }}
        {%- endif -%}
    {%- else -%}
        {{ exceptions.raise_compiler_error("vars_spec entry of " ~ name ~ " has unknown type '" ~ kind ~ "'") }}
    {%- endif -%}
    {{ return(none) }}
{%- endmacro %}


{#- "a whole number >= 4", "a number > 0 and < 1", ... for messages. -#}
{% macro allowed_text(rule, spec) -%}
    {%- set kind = rule.get('type') -%}
    {%- set parts = ["a whole number" if kind == 'int' else "a number"] -%}
    {%- for bound, sign in [('min', '>='), ('max', '<='), ('above', '>'), ('below', '<')] if bound in rule -%}
        {%- set limit = rule[bound] -%}
        {%- do parts.append(sign ~ " " ~ (limit ~ " (" ~ bound_value(limit, spec) ~ ")" if limit is string else limit)) -%}
    {%- endfor -%}
    {{ return(parts[0] ~ (" " ~ parts[1:] | join(" and ") if parts | length > 1 else "")
              ~ (" or null" if rule.get('optional') else "")) }}
{%- endmacro %}


{#- A bound written as a number, or as the name of another var (its value; null if unset). -#}
{% macro bound_value(limit, spec) -%}
    {%- if limit is string -%}
        {%- set other = var(limit) -%}
        {{ return(none if other is none or var_problem(limit, spec) else other | float) }}
    {%- endif -%}
    {{ return(limit | float) }}
{%- endmacro %}


{% macro normalised_value(value, rule) -%}
    {%- set kind = rule.get('type') -%}
    {%- if value is none -%}
        {{ return(none) }}
    {%- elif kind == 'int' -%}
        {{ return(value | int) }}
    {%- elif kind == 'number' -%}
        {{ return(value | float) }}
    {%- elif kind in ('region_list', 'code_list') -%}
        {%- set codes = [] -%}
        {%- for code in value -%}{%- do codes.append("%0*d" | format(rule.get('digits', 2), code | int)) -%}{%- endfor -%}
        {{ return(codes) }}
    {%- elif kind == 'period' -%}
        {{ return({'start': value['start'] | int, 'end': value['end'] | int}) }}
    {%- endif -%}
    {{ return(value) }}
{%- endmacro %}


{#- "dbt var scope_year_strat is not a setting (did you mean scope_year_start?) ...": the
    closest declared name by shared letter pairs (Dice coefficient >= 0.5). -#}
{% macro unknown_var_message(name, known) -%}
    {%- set best = namespace(name=none, score=0.5) -%}
    {%- set pairs = letter_pairs(name) -%}
    {%- for candidate in known -%}
        {%- set other = letter_pairs(candidate) -%}
        {%- set shared = pairs | select('in', other) | list | length -%}
        {%- set score = 2.0 * shared / ((pairs | length) + (other | length) or 1) -%}
        {%- if score >= best.score -%}
            {%- set best.name = candidate -%}
            {%- set best.score = score -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return("dbt var " ~ name ~ " is not a setting of this project"
              ~ (" (did you mean " ~ best.name ~ "?)" if best.name else "")
              ~ "; dbt would ignore it silently. The settings are listed under vars: in dbt_project.yml") }}
{%- endmacro %}


{% macro letter_pairs(text) -%}
    {%- set pairs = [] -%}
    {%- for i in range((text | length) - 1) -%}{%- do pairs.append(text[i:i + 2]) -%}{%- endfor -%}
    {{ return(pairs) }}
{%- endmacro %}
