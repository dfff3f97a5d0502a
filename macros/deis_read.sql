{#-
    Read the DEIS microdata files named by var('deis_<kind>_path') (kind: deaths or births): a
    file, a folder, a glob or a published ZIP. Python (infant_mortality.dbt_plugins.deis_files,
    reached via the DuckDB function imr_deis_inspect that its dbt-duckdb plugin registers) lists
    every entry, keeps ZIP members safely in var('deis_cache_dir') (a deflated one as gzip),
    detects encoding, header and layout, counts each file's lines and refuses what it cannot
    read; DuckDB then reads the files with read_csv, every column as text under its canonical
    DEIS name (NULL for a column the layout lacks), plus source_file, source_line (the line
    number in the file, counting the header and blank lines), source_layout and source_columns
    (the canonical columns the file has, ';'-joined).
    source_file and source_layout are ENUMs (deis_enum_type) of every file and layout of the kind:
    the same for every shard, so their union keeps the type.
    With shard and shards, only that shard of the files is read (deis_shard_files).
-#}
{% macro deis_read(kind, select_columns, shard=none, shards=none) -%}
    {#- Every read waits until both kinds are inspected, so that the reads start together and end
        together. Otherwise the births shards start reading while Python still inflates the deaths
        ZIP, which slows that inflating (scale 8: 9 s alone, 14 s beside the births reads); the
        deaths read then started last and ran alone at the end (scale 8, builds run in pairs:
        131.5 and 129.6 s without the wait, 130.4 and 126.4 s with it). -#}
    {#- The two births shards compile at once in dbt's two threads: the second starts with the
        births, so that the two kinds are inspected side by side (the deaths ZIP inflating in
        one thread, the births files scanned in the other) instead of one after the other
        (scale 8: 7.8 s with both shards waiting). Each inspection runs once; the other thread
        waits for it (deis_files.inspect_json). -#}
    {%- set both = {} -%}
    {%- for each in (['births', 'deaths'] if shard == 2 else ['deaths', 'births']) if execute -%}
        {%- do both.update({each: deis_inspect(each).files}) -%}
    {%- endfor -%}
    {%- set inspected = both.get(kind, []) -%}
    {%- set files = deis_shard_files(inspected, shard, shards, deis_shard_shares(kind, shards, both)) -%}
    {%- if not files -%}
        {#- Parsing, or a shard without files: the shape without touching any file. -#}
        select
            cast(null as varchar) as source_file,
            cast(null as bigint) as source_line,
            cast(null as varchar) as source_layout,
            cast(null as varchar) as source_columns,
            {%- for column in select_columns %}
            cast(null as varchar) as {{ column }}{{ "," if not loop.last }}
            {%- endfor %}
        where false
    {%- else -%}
        {#- Files of one layout (header, encoding, columns) are read by one read_csv over the
            list, in parallel; one file at a time was 30% slower on 30 yearly births files. -#}
        {%- set groups = {} -%}
        {%- for file in files -%}
            {%- set key = (file.header, file.encoding, file.layout, file.compression, file.columns | join(',')) | join('|') -%}
            {%- do groups.setdefault(key, []).append(file) -%}
        {%- endfor -%}
        {%- set types = {'file': deis_enum_type(inspected | map(attribute='source_file')),
                         'layout': deis_enum_type(inspected | map(attribute='layout'))} -%}
        {%- for files in groups.values() %}
        {{ "union all" if not loop.first }}
        {{ deis_read_group(files, select_columns, types) }}
        {%- endfor %}
    {%- endif -%}
{%- endmacro %}


{#- Shard `shard` (1..shards) of the files, in their order: file i goes to the shard holding the
    middle of its records, so each shard gets about its share of the records (`shares`, one
    fraction per shard; equal shares if none) and whole files. DuckDB numbers the rows of one
    read on one core (row_number() over () keeps the read's order), so reading the births in two
    shards, two models run by two dbt threads, uses both cores; it took the births staging from
    53 to 28 s at 31 million records. No shard: all files. -#}
{% macro deis_shard_files(files, shard=none, shards=none, shares=none) -%}
    {%- if shard is none -%}{{ return(files) }}{%- endif -%}
    {%- set ns = namespace(total=0, before=0) -%}
    {%- for file in files -%}{%- set ns.total = ns.total + file.records_expected -%}{%- endfor -%}
    {%- set shares = shares or [1.0 / shards] * shards -%}
    {%- set picked = [] -%}
    {%- for file in files -%}
        {%- set middle = (ns.before + file.records_expected / 2) / [ns.total, 1] | max -%}
        {%- set owner = namespace(shard=none, upto=0) -%}
        {%- for share in shares -%}
            {%- set owner.upto = owner.upto + share -%}
            {%- if owner.shard is none and middle < owner.upto -%}{%- set owner.shard = loop.index -%}{%- endif -%}
        {%- endfor -%}
        {#- The last shard also takes a middle that rounding left past the sum of the shares. -#}
        {%- if (owner.shard or shards) == shard -%}{%- do picked.append(file) -%}{%- endif -%}
        {%- set ns.before = ns.before + file.records_expected -%}
    {%- endfor -%}
    {{ return(picked) }}
{%- endmacro %}


{#- The share of the records each shard of `kind` reads. The deaths are one read and the births
    two shards, and the ingest ends when the last read ends. A deaths record costs about 2.25
    times a births record to stage (a compressed file read on one core, more columns, the age
    classification: 2.47 against 1.10 microseconds of CPU at scale 8). With dbt's two threads
    (the profile's: on two cores a third thread only adds contention for Python's lock later in
    the build) the two births shards start first (dbt takes ready nodes in name order) and the
    deaths when the first shard ends, so the reads end together when the first shard plus the
    deaths weigh as much as the second shard. With three threads or more the three reads run at
    once and end together when the second shard weighs as much as the deaths and the first holds
    the rest (halves at scale 8 left the births ending 11 s before the deaths, one core idle). -#}
{% macro deis_shard_shares(kind, shards, inspected) -%}
    {%- if kind != 'births' or shards != 2 or not inspected -%}{{ return(none) }}{%- endif -%}
    {%- set deaths = 2.25 * inspected.deaths | sum(attribute='records_expected') -%}
    {%- set births = [inspected.births | sum(attribute='records_expected'), 1] | max -%}
    {%- if target.threads >= 3 -%}
        {%- set first = 1 - deaths / births -%}
    {%- else -%}
        {%- set first = (1 - deaths / births) / 2 -%}
    {%- endif -%}
    {%- set first = [0.0, [0.5, first] | min] | max -%}
    {{ return([first, 1 - first]) }}
{%- endmacro %}


{#- What Python found at var('deis_<kind>_path'): {files: [...], entries: [...]}; stops the build
    with the reason when the path cannot be read safely or holds no DEIS file. -#}
{% macro deis_inspect(kind) -%}
    {%- set path = checked_var('deis_' ~ kind ~ '_path') -%}
    {%- if kind == 'births' and deis_births_from_bundle() -%}
        {#- No births file: the bundled births by commune feed the years they cover. -#}
        {{ return({'files': [], 'entries': []}) }}
    {%- endif -%}
    {%- if not path -%}
        {{ exceptions.raise_compiler_error(
            "vital_source is deis_microdata but var 'deis_" ~ kind ~ "_path' is not set: "
            ~ "pass a file, folder, glob or published ZIP, e.g. --vars '{deis_" ~ kind ~ "_path: ...}'") }}
    {%- endif -%}
    {%- set registered = run_query(
        "select count(*) from duckdb_functions() where function_name = 'imr_deis_inspect'").columns[0].values()[0] -%}
    {%- if registered == 0 -%}
        {{ exceptions.raise_compiler_error(
            "Reading DEIS microdata needs the DuckDB function imr_deis_inspect: add "
            ~ "'- module: infant_mortality.dbt_plugins.deis_files' under plugins: in the dbt profile") }}
    {%- endif -%}
    {%- set options = tojson({'max_member_bytes': int_var('deis_zip_max_member_bytes'),
                              'max_ratio': number_var('deis_zip_max_ratio'),
                              'gzip_max_ratio': number_var('deis_gzip_max_ratio'),
                              'empty_files': checked_var('deis_empty_files')}) -%}
    {%- set call -%}
        select imr_deis_inspect(
            {{ sql_string(path) }}, {{ sql_string(kind) }}, {{ string_var('deis_encoding') }},
            {{ string_var('deis_cache_dir') }}, {{ sql_string(options) }})
    {%- endset -%}
    {%- set answer = fromjson(run_query(call).columns[0].values()[0]) -%}
    {%- if answer.error -%}
        {{ exceptions.raise_compiler_error(answer.error) }}
    {%- endif -%}
    {{ return(answer) }}
{%- endmacro %}


{#- count_basis of a warehouse built from the microdata: files written by imr-generate-deis
    (names starting synthetic_deis_) make the whole build say it is synthetic; without a births
    file it says the births are the bundled ones (real, by commune, 2001-2016). -#}
{% macro deis_count_basis() -%}
    {%- set generated = [] -%}
    {%- if execute -%}
        {%- for kind in ['deaths', 'births'] -%}
            {%- for file in deis_inspect(kind).files if file.generated -%}
                {%- do generated.append(file.source_file) -%}
            {%- endfor -%}
        {%- endfor -%}
    {%- endif -%}
    {%- if deis_births_from_bundle() -%}
        {%- set deaths = 'GENERATED DEIS-layout microdata (synthetic): death records, not official figures'
            if generated else 'DEIS microdata: death records' -%}
        {{ return(deaths ~ '; live births: bundled DEIS births by commune 2001-2016 (' ~ deis_births_bundle_file() ~ ')') }}
    {%- endif -%}
    {%- if generated -%}
        {{ return('GENERATED DEIS-layout microdata (synthetic): death and birth records, not official figures') }}
    {%- endif -%}
    {{ return('DEIS microdata: death and birth records') }}
{%- endmacro %}


{#- Microdata mode with var deis_births_path empty: the births are the bundled births by commune
    (stg_deis_aggregates__births_by_commune_year) for the years they cover; a births file of the
    user's, when given, is the only births source. -#}
{% macro deis_births_from_bundle() -%}
    {{ return(var('vital_source') == 'deis_microdata' and not checked_var('deis_births_path')) }}
{%- endmacro %}

{#- The bundled births file's name, as count_basis and the audit cite it. -#}
{% macro deis_births_bundle_file() -%}
    {{ return('data/raw/deis_births_by_commune_year_2001_2016.csv') }}
{%- endmacro %}


{#- One read_csv over files of one layout. source_line is the record's line in its own file:
    DuckDB reads the listed files in order and keeps each file's rows in order (insertion order
    is preserved), so a row's position in the whole read minus the records of the files before
    it gives its record number; the header and the blank lines before it (which DuckDB skips;
    Python found them) are added. The records of the files before come from Python's line
    counts (records_expected); if DuckDB read another number of records from a file, the numbers
    after it would shift, and that is exactly what int_deis__input_checks stops the build on
    (records staged per file <> records_expected), so a published line number is always exact.
    Files are told apart by read_csv's virtual column file_index (the position in the list, from
    0). Counting from Python instead of finding each file's first row with a self-join halved the
    CPU time of the births staging at 7.7 million records. -#}
{% macro deis_read_group(files, select_columns, types) -%}
    {%- set first = files[0] -%}
    {%- set picked = [] -%}
    {%- for column in select_columns -%}
        {%- do picked.append(column if column | upper in first.columns else 'cast(null as varchar) as ' ~ column) -%}
    {%- endfor -%}
    {%- set named = [] -%}
    {%- for column in first.columns if not column.startswith('extra_') -%}
        {%- do named.append(column) -%}
    {%- endfor -%}
    {%- set fixed -%}
        cast({{ sql_string(first.layout) }} as {{ types.layout }}) as source_layout,
        {{ sql_string(named | join(';')) }} as source_columns
    {%- endset -%}
    {%- if files | length == 1 %}
    {#- One file (the deaths file): number its rows directly. -#}
    select
        cast({{ sql_string(first.source_file) }} as {{ types.file }}) as source_file,
        {{ deis_line_number('record_number', first) }} as source_line,
        {{ fixed }},
        {{ select_columns | join(', ') }}
    from (
        select row_number() over () as record_number, {{ picked | join(', ') }}
        from {{ deis_read_csv(files) }}
    )
    {%- else %}
    {%- set has_blank_lines = files | selectattr('blank_lines') | list | length > 0 %}
    select
        listed.source_file,
        {{ deis_line_number('numbered.row_in_read - listed.records_before',
                            first, 'listed.blank_thresholds' if has_blank_lines else none) }} as source_line,
        {{ fixed }},
        {%- for column in select_columns %}
        numbered.{{ column }}{{ "," if not loop.last }}
        {%- endfor %}
    from (
        select file_index, row_number() over () as row_in_read, {{ picked | join(', ') }}
        from {{ deis_read_csv(files) }}
    ) as numbered
    inner join (
        {%- set ns = namespace(records_before=0) %}
        {%- for file in files %}
        select cast({{ loop.index0 }} as ubigint) as file_index, cast({{ sql_string(file.source_file) }} as {{ types.file }}) as source_file,
            cast({{ ns.records_before }} as bigint) as records_before, {{ deis_blank_thresholds(file) }} as blank_thresholds
        {{ "union all" if not loop.last }}
        {%- set ns.records_before = ns.records_before + file.records_expected %}
        {%- endfor %}
    ) as listed on numbered.file_index = listed.file_index
    {%- endif %}
{%- endmacro %}


{#- An ENUM type of the distinct values, sorted (so ORDER BY sorts an ENUM column as it would
    sort the text). source_file and source_layout are the same for every record of a file: as
    ENUMs each record stores a small number instead of a copy of the text, which took 8 s of
    CPU off the staging of 82 million records (a path is too long to be stored inline). -#}
{% macro deis_enum_type(values) -%}
    enum({%- for value in values | unique(case_sensitive=true) | sort(case_sensitive=true) %}{{ sql_string(value) }}{{ ", " if not loop.last }}{% endfor -%})
{%- endmacro %}


{#- For each blank line b_j (j = 1, 2, ...), the first record number that comes after it:
    b_j - header - (j - 1). A record's line is its number + header + the thresholds it reaches. -#}
{% macro deis_blank_thresholds(file) -%}
    {%- set header_lines = 1 if file.header else 0 -%}
    cast([{%- for blank in file.blank_lines -%}{{ blank - header_lines - loop.index0 }}{{ ", " if not loop.last }}{%- endfor -%}] as bigint[])
{%- endmacro %}


{% macro deis_line_number(record_number, file, thresholds=none) -%}
    {%- set header_lines = 1 if file.header else 0 -%}
    {%- if thresholds is not none -%}
    {{ record_number }} + {{ header_lines }} + len(list_filter({{ thresholds }}, lambda t: t <= {{ record_number }}))
    {%- elif file.blank_lines -%}
    {{ record_number }} + {{ header_lines }} + len(list_filter({{ deis_blank_thresholds(file) }}, lambda t: t <= {{ record_number }}))
    {%- else -%}
    {{ record_number }} + {{ header_lines }}
    {%- endif -%}
{%- endmacro %}


{#- read_csv of files sharing one layout: every column as text under its canonical DEIS name.
    Each path is the file Python inspected, escaped so that DuckDB reads that very file and never
    treats `[`, `*` or `?` in its name as a glob (duckdb_literal_path).
    DEIS fields are never quoted, so no quote character is set: a field that starts with a quote
    stays one field of one line instead of swallowing the following lines. -#}
{% macro deis_read_csv(files) -%}
    {%- set first = files[0] -%}
    read_csv(
        [{%- for file in files %}{{ sql_string(duckdb_literal_path(file.path)) }}{{ ", " if not loop.last }}{% endfor -%}],
        delim = ';',
        header = {{ "true" if first.header else "false" }},
        auto_detect = false,
        columns = { {%- for column in first.columns %}{{ sql_string(column) }}: 'VARCHAR'{{ ", " if not loop.last }}{% endfor -%} },
        encoding = {{ sql_string(first.encoding) }},
        compression = {{ sql_string('gzip' if first.compression == 'gzip' else 'none') }},
        quote = '',
        escape = ''
    )
{%- endmacro %}


{#- A Python value as a typed SQL literal (text quoted by sql_string; NULL typed). -#}
{% macro deis_sql_value(value, type) -%}
    {%- if value is none -%}cast(null as {{ type }}){%- elif type == 'varchar' -%}{{ sql_string(value) }}{%- else -%}cast({{ value }} as {{ type }}){%- endif -%}
{%- endmacro %}


{#- A path DuckDB's readers take literally: `[`, `*` and `?` (its glob characters) each written
    as a one-character class, so `d[1].csv` reads d[1].csv, never d1.csv. -#}
{% macro duckdb_literal_path(path) -%}
    {{ return(path | replace('[', '[[]') | replace('*', '[*]') | replace('?', '[?]')) }}
{%- endmacro %}
