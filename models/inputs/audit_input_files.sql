-- Every input the build looked at: each entry of the raw-data folder (var raw_data_dir) and, in
-- microdata mode, each directory entry and ZIP member under deis_deaths_path and
-- deis_births_path, with its size, checksum, layout, line and record counts and what was done
-- with it. Python lists the entries (infant_mortality.dbt_plugins.deis_files); an entry that cannot be read
-- safely has already stopped the build, so the actions here are `read ...` or `not read: why`.
{%- set rows = [] -%}
{%- if execute -%}
    {#- The raw files some dbt source reads (its external_location names the file). -#}
    {%- set locations = [] -%}
    {%- for node in graph.sources.values() -%}
        {%- set location = (node.config or {}).get('external_location') or (node.meta or {}).get('external_location') or '' -%}
        {%- do locations.append((node.source_name ~ '.' ~ node.name, location)) -%}
    {%- endfor -%}
    {%- set listing = fromjson(run_query("select imr_raw_files(" ~ string_var('raw_data_dir') ~ ", '[]')").columns[0].values()[0]) -%}
    {%- if listing.error -%}
        {{ exceptions.raise_compiler_error(listing.error) }}
    {%- endif -%}
    {%- for entry in listing.entries -%}
        {%- set name = entry.entry.split('/')[-1] -%}
        {%- set readers = [] -%}
        {%- for source_name, location in locations if name and name in location -%}
            {%- do readers.append(source_name) -%}
        {%- endfor -%}
        {%- set action = 'read by dbt source ' ~ (readers | join(', ')) if readers else (entry.action if entry.entry_type == 'folder' else 'not read: no dbt source uses this file') -%}
        {%- do rows.append({'input': 'raw_data', 'entry': entry.entry, 'entry_type': entry.entry_type,
                            'size_bytes': entry.size_bytes, 'sha256': entry.sha256, 'layout': 'aggregate CSV' if readers else none,
                            'encoding': none, 'lines': entry.lines, 'blank_lines': entry.blank_lines,
                            'records_expected': none, 'action': action}) -%}
    {%- endfor -%}
    {%- if var('vital_source') == 'deis_microdata' -%}
        {%- for kind in ['deaths', 'births'] -%}
            {%- set found = deis_inspect(kind) -%}
            {%- set files = {} -%}
            {%- for file in found.files -%}
                {%- do files.update({file.source_file: file}) -%}
            {%- endfor -%}
            {%- for entry in found.entries -%}
                {%- set file = files.get(entry.entry) -%}
                {%- do rows.append({'input': 'deis_' ~ kind, 'entry': entry.entry, 'entry_type': entry.entry_type,
                                    'size_bytes': entry.size_bytes, 'sha256': entry.sha256,
                                    'layout': file.layout if file else none, 'encoding': file.encoding if file else none,
                                    'lines': file.lines if file else none,
                                    'blank_lines': (file.blank_lines | length) if file else none,
                                    'records_expected': file.records_expected if file else none,
                                    'action': entry.action}) -%}
            {%- endfor -%}
        {%- endfor -%}
    {%- endif -%}
{%- endif %}

with entries as (
    {%- for row in rows %}
    select
        {{ deis_sql_value(row.input, 'varchar') }} as input,
        {{ deis_sql_value(row.entry, 'varchar') }} as entry,
        {{ deis_sql_value(row.entry_type, 'varchar') }} as entry_type,
        {{ deis_sql_value(row.size_bytes, 'bigint') }} as size_bytes,
        {{ deis_sql_value(row.sha256, 'varchar') }} as sha256,
        {{ deis_sql_value(row.layout, 'varchar') }} as layout,
        {{ deis_sql_value(row.encoding, 'varchar') }} as encoding,
        {{ deis_sql_value(row.lines, 'bigint') }} as lines,
        {{ deis_sql_value(row.blank_lines, 'bigint') }} as blank_lines,
        {{ deis_sql_value(row.records_expected, 'bigint') }} as records_expected,
        {{ deis_sql_value(row.action, 'varchar') }} as action
    {{ "union all" if not loop.last }}
    {%- endfor %}
    {%- if not rows %}
    select cast(null as varchar) as input, cast(null as varchar) as entry, cast(null as varchar) as entry_type,
        cast(null as bigint) as size_bytes, cast(null as varchar) as sha256, cast(null as varchar) as layout,
        cast(null as varchar) as encoding, cast(null as bigint) as lines, cast(null as bigint) as blank_lines,
        cast(null as bigint) as records_expected, cast(null as varchar) as action
    where false
    {%- endif %}
),

{% if var('vital_source') == 'deis_microdata' %}
records as (
    -- Records staged per file; int_deis__input_checks has already stopped the build if they
    -- differ from the lines Python counted.
    select 'deis_' || kind as input, source_file as entry, records_staged
    from {{ ref('int_deis__input_checks') }}
)
{% else %}
records as (
    select cast(null as varchar) as input, cast(null as varchar) as entry, cast(null as bigint) as records_staged
    where false
)
{% endif %}

select
    entries.input,
    entries.entry,
    entries.entry_type,
    entries.size_bytes,
    entries.sha256,
    entries.layout,
    entries.encoding,
    entries.lines,
    entries.blank_lines,
    entries.records_expected,
    records.records_staged as records_read,
    entries.action
from entries
left join records on entries.input = records.input and entries.entry = records.entry
